//! [`Backend::Smol`](crate::Backend::Smol): smol's global executor.

use crate::{Driver, Error};

pub(crate) fn spawn(run: Driver) -> Result<(), Error> {
    // smol starts its executor's threads at its first spawn, and panics if the system refuses
    // them: an error here, the driver dropped as a refused thread's is.
    super::caught_refusal(|| smol::spawn(run).detach())
}
