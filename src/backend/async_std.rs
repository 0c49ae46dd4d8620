//! [`Backend::AsyncStd`](crate::Backend::AsyncStd): async-std's global executor.

use crate::{Driver, Error};

pub(crate) fn spawn(run: Driver) -> Result<(), Error> {
    // async-std starts its executor's threads at its first spawn, and panics if the system
    // refuses them: an error here, the driver dropped as a refused thread's is. Dropping an
    // async-std JoinHandle detaches the task.
    super::caught_refusal(|| drop(async_std::task::spawn(run)))
}
