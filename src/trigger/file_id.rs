//! [`FileId`]: which open file a descriptor number names, so the set can tell the file it watches
//! from a number the library closed, or that names another file by now.

use std::os::fd::{BorrowedFd, RawFd};

/// A file by device and inode, as `fstat` gives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FileId {
    dev: u64,
    ino: u64,
}

impl FileId {
    /// The file `fd` names now; `None` if it names none (closed, or negative).
    #[allow(unsafe_code, clippy::unnecessary_cast)] // `dev_t` and `ino_t` differ by platform
    pub(super) fn of(fd: RawFd) -> Option<FileId> {
        if fd < 0 {
            return None;
        }
        // SAFETY: the borrow lasts for one `fstat` call, which only reads the number's metadata:
        // a number that is closed fails with `EBADF`, one that names another file gives that
        // file's identity (which is what the caller asks), and nothing is read or written through
        // it.
        let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
        let stat = rustix::fs::fstat(borrowed).ok()?;
        Some(FileId {
            dev: stat.st_dev as u64,
            ino: stat.st_ino as u64,
        })
    }
}
