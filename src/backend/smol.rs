use crate::Run;

pub(crate) fn spawn(run: Run) {
    smol::spawn(run).detach();
}
