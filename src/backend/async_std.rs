use crate::Driver;

pub(crate) fn spawn(run: Driver) {
    // Dropping an async-std JoinHandle detaches the task.
    drop(async_std::task::spawn(run));
}
