//! [`FileId`]: which file a descriptor number names, so the set can tell the file it watches from
//! a number the library closed, or that names another file by now.
//!
//! Device and inode tell two live sockets apart, but not two open files of one inode: every
//! eventfd, timerfd, signalfd and epoll instance shares the kernel's anonymous inode, and a FIFO
//! or a device node opened again by path is the same inode under a new open file. For those the
//! set asks the kernel itself whether its entry is still the number's file
//! (`Instance::still_holds`).

use std::os::fd::{BorrowedFd, RawFd};

/// A file by device and inode, as `fstat` gives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FileId {
    dev: u64,
    ino: u64,
    socket: bool,
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
            socket: rustix::fs::FileType::from_raw_mode(stat.st_mode)
                == rustix::fs::FileType::Socket,
        })
    }

    /// Whether the identity names one open file: a socket's inode is its own while it lives.
    pub(super) fn is_a_socket(self) -> bool {
        self.socket
    }
}
