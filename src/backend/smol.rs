use crate::Driver;

pub(crate) fn spawn(run: Driver) {
    smol::spawn(run).detach();
}
