//! The record directory as `run` needs it, and who writes each camera's folder in it.
//!
//! Owns: [`check`] (what `check-config` refuses about `record.dir` because `run` could not create
//! it: a regular file, a path under a file, a place nothing can be created in; checked by creating
//! what is missing and removing it again) and the lock of a camera's folder ([`FolderLock`]: an
//! exclusive `flock` on `<record.dir>/<camera>/.recording.lock`, held for as long as a recorder
//! writes there). Two daemons sharing a record directory must not touch each other's clips being
//! written: the second one's start is refused for a camera whose folder the first holds
//! ([`FolderLock::take`]), and the index never recovers a `.part` file in a folder another
//! process holds ([`held_elsewhere`]). Must not: write a clip or read one.

use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::path::{Path, PathBuf};

/// The lock file in each camera's folder (a dot file: the index lists clips only).
pub const LOCK_FILE: &str = ".recording.lock";

/// Whether `dir` can be the record directory: a directory, or a path whose missing part can be
/// created (it is created and removed again: nothing is left behind). A place this user may not
/// create in is left to the service when this user is not root (the service's own directories
/// are not everyone's): `run` finds out.
pub fn check(dir: &Path) -> io::Result<()> {
    match std::fs::metadata(dir) {
        Ok(metadata) if metadata.is_dir() => return Ok(()),
        Ok(_) => return Err(io::Error::new(io::ErrorKind::NotADirectory, "a file, not a directory")),
        Err(error) if error.kind() != io::ErrorKind::NotFound => return Err(error),
        Err(_) => {}
    }
    let missing: Vec<&Path> = dir.ancestors().take_while(|path| std::fs::symlink_metadata(path).is_err()).collect();
    match std::fs::create_dir_all(dir) {
        Ok(()) => {
            // Deepest first: each is empty once the one below it is gone.
            for created in missing {
                let _ = std::fs::remove_dir(created);
            }
            Ok(())
        }
        Err(error) if error.kind() == io::ErrorKind::PermissionDenied && !crate::sys::access::is_root() => Ok(()),
        Err(error) => Err(error),
    }
}

/// A camera folder's lock, held while a recorder of this process writes there; released when
/// dropped (the descriptor closes, also when the process dies however it dies).
#[derive(Debug)]
pub struct FolderLock {
    _file: File,
}

/// Why a camera's folder could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum FolderError {
    #[error("{path}: another process records this camera into the same folder (it holds {LOCK_FILE})")]
    HeldElsewhere { path: PathBuf },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

impl FolderLock {
    /// Creates `folder` when missing and takes its lock, without waiting.
    pub fn take(folder: &Path) -> Result<FolderLock, FolderError> {
        let failed = |source| FolderError::Io { path: folder.to_path_buf(), source };
        std::fs::create_dir_all(folder).map_err(failed)?;
        let file = open_lock(folder).map_err(failed)?;
        match file.try_lock() {
            Ok(()) => Ok(FolderLock { _file: file }),
            Err(TryLockError::WouldBlock) => Err(FolderError::HeldElsewhere { path: folder.to_path_buf() }),
            Err(TryLockError::Error(source)) => Err(failed(source)),
        }
    }
}

fn open_lock(folder: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).truncate(false).write(true).open(folder.join(LOCK_FILE))
}

/// Whether another recorder (another process, or another open of the lock) holds `folder` now:
/// its `.part` files are clips being written, not clips cut short. A folder without a lock file,
/// or one that cannot be opened, is nobody's.
pub fn held_elsewhere(folder: &Path) -> bool {
    if !folder.join(LOCK_FILE).exists() {
        return false;
    }
    match open_lock(folder) {
        Ok(file) => matches!(file.try_lock(), Err(TryLockError::WouldBlock)),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_a_path_under_a_file_and_a_place_nothing_is_created_in_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("file");
        std::fs::write(&file, b"x").expect("write");
        assert!(check(&file).is_err(), "a regular file");
        assert!(check(&file.join("clips")).is_err(), "under a file");
        assert!(check(Path::new("/proc/jetson-detectd-clips")).is_err(), "nothing is created in /proc");
        assert!(check(dir.path()).is_ok());
        let deep = dir.path().join("a/b/clips");
        assert!(check(&deep).is_ok());
        assert!(!dir.path().join("a").exists(), "what was created is removed again");
    }

    #[test]
    fn a_folder_held_by_one_lock_is_refused_to_another_and_free_once_dropped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let folder = dir.path().join("gate");
        assert!(!held_elsewhere(&folder));
        let first = FolderLock::take(&folder).expect("free");
        assert!(held_elsewhere(&folder));
        assert!(matches!(FolderLock::take(&folder), Err(FolderError::HeldElsewhere { .. })));
        drop(first);
        assert!(!held_elsewhere(&folder));
        FolderLock::take(&folder).expect("free again");
    }
}
