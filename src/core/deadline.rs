//! [`NextDeadline`]: when the loop said it next needs to run.

use std::time::Instant;

use crate::sync::{lock, Mutex};

/// When `run_once` last said it next needs to run, for pumps that report deadlines
/// ([`Builder::build_with_deadline`](crate::Builder::build_with_deadline)). Written by the run,
/// read by the driver before it sleeps.
#[derive(Debug)]
pub(crate) struct NextDeadline(Mutex<Option<Instant>>);

impl NextDeadline {
    pub(crate) fn new(at: Option<Instant>) -> NextDeadline {
        NextDeadline(Mutex::new(at))
    }

    pub(crate) fn set(&self, at: Option<Instant>) {
        *lock(&self.0) = at;
    }

    pub(crate) fn get(&self) -> Option<Instant> {
        *lock(&self.0)
    }
}
