//! [`NextRun`]: when the loop said it next needs to run.

use crate::sync::{lock, Mutex};
use crate::Next;

/// What the last run said about the next ([`Next`]). Written by the run, read by the driver
/// before it sleeps.
#[derive(Debug)]
pub(crate) struct NextRun(Mutex<Next>);

impl NextRun {
    pub(crate) fn new(first: Next) -> NextRun {
        NextRun(Mutex::new(first))
    }

    pub(crate) fn set(&self, next: Next) {
        *lock(&self.0) = next;
    }

    pub(crate) fn get(&self) -> Next {
        *lock(&self.0)
    }
}
