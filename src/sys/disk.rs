//! How much room a file system has left (`statvfs`), for the recorder's full-disk pause.
//!
//! Owns: the one `statvfs` call and its safety. Must not: decide what is "full" (the caller's
//! threshold does) or create anything.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Room on the file system that holds `path`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Room {
    /// Bytes an unprivileged writer may still use.
    pub available: u64,
    pub total: u64,
}

/// The room on the file system holding `path` (which must exist).
pub fn room(path: &Path) -> io::Result<Room> {
    let name = CString::new(path.as_os_str().as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: statvfs has no alignment or validity requirement beyond being plain data; zeroed is
    // a valid value of it.
    let mut stats: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `name` is a NUL-terminated path that outlives the call, and `stats` is a valid,
    // writable statvfs the call fills in.
    if unsafe { libc::statvfs(name.as_ptr(), &mut stats) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let unit = stats.f_frsize as u64;
    Ok(Room {
        available: (stats.f_bavail as u64).saturating_mul(unit),
        total: (stats.f_blocks as u64).saturating_mul(unit),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_room_of_an_existing_directory_is_known_and_a_missing_one_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let room = room(dir.path()).expect("statvfs");
        assert!(room.total > 0 && room.available <= room.total, "{room:?}");
        assert!(super::room(&dir.path().join("absent")).is_err());
    }
}
