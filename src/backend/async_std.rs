use crate::Run;

pub(crate) fn spawn(run: Run) {
    // Dropping an async-std JoinHandle detaches the task.
    drop(async_std::task::spawn(run));
}
