//! Opening and reading files that a config or a command line names (the config itself, label
//! files, password and PEM files, models and image files), and replacing the files the daemon
//! writes (engines, timing caches, the compiled kernel, the zones file) atomically.
//!
//! Owns: the rule that such a path is opened without blocking (`O_NONBLOCK`, so a FIFO can never
//! hang the caller), must be a regular file (a directory, FIFO, socket or device such as
//! `/dev/zero` is refused before a byte is read), and is read with a size bound, both from its
//! length and while reading (a file that grows under us is still cut off). The bounds below are
//! documented in the README's "Untrusted input limits". And [`atomic_write`]: a temp file in the
//! target's directory, fsynced, renamed over the target, then the directory fsynced, so that a
//! crash or a power cut at any moment leaves the old file or the new one whole under the name,
//! never a torn one; the temp file is given to the directory's owner when root writes into
//! another user's directory ([`adopt_dir_owner`]), so the service can replace what
//! `sudo jetson-detectd build-engine` wrote. And the lock beside such a file ([`lock_beside`]),
//! which processes sharing a state directory take around a read-change-write of it, the clean-up
//! of temp files a write killed half-way left ([`remove_temp_leftovers`]), and the name a file of
//! the daemon's own that does not read is moved aside to ([`aside_path`]). Must not: know
//! what the bytes mean, name config keys (callers add the key and path to the error), or log.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Largest config file (`--config`): a config is a few KiB.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;
/// Largest label file: 1 MiB holds far more than the 100 000 classes any detector has.
pub const MAX_LABELS_BYTES: u64 = 1 << 20;
/// Largest MQTT password file (only its first line is the password).
pub const MAX_PASSWORD_BYTES: u64 = 4 << 10;
/// Largest PEM file (`mqtt.tls.ca_file`, `client_cert`, `client_key`): the whole Mozilla CA
/// bundle is about 220 KiB.
pub const MAX_PEM_BYTES: u64 = 1 << 20;
/// Largest model file (`model.onnx`, `model.engine`): an ONNX protobuf cannot exceed 2 GiB.
pub const MAX_MODEL_BYTES: u64 = 2 << 30;

/// Why a file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// It could not be opened, inspected or read (missing, no permission, …).
    #[error("{0}")]
    Io(#[from] io::Error),
    /// It is not a regular file.
    #[error("is a {0}, not a regular file")]
    NotRegular(&'static str),
    /// It is larger than the bound for its kind.
    #[error("is larger than the {limit} bytes allowed ({size} bytes)")]
    TooLarge { size: u64, limit: u64 },
    /// Text was expected.
    #[error("is not valid UTF-8 text")]
    NotUtf8,
}

/// What kind of file `metadata` describes, for a refusal message.
fn kind(file_type: std::fs::FileType) -> &'static str {
    if file_type.is_dir() {
        "directory"
    } else if file_type.is_fifo() {
        "FIFO"
    } else if file_type.is_socket() {
        "socket"
    } else if file_type.is_char_device() {
        "character device"
    } else if file_type.is_block_device() {
        "block device"
    } else {
        "special file"
    }
}

/// Opens `path` for reading without blocking and checks that it is a regular file of at most
/// `limit` bytes; returns the file and its length.
pub fn open_regular(path: &Path, limit: u64) -> Result<(File, u64), ReadError> {
    let file = OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC).open(path)?;
    let metadata = file.metadata()?;
    if !metadata.file_type().is_file() {
        return Err(ReadError::NotRegular(kind(metadata.file_type())));
    }
    if metadata.len() > limit {
        return Err(ReadError::TooLarge { size: metadata.len(), limit });
    }
    Ok((file, metadata.len()))
}

/// The whole regular file at `path`, at most `limit` bytes.
pub fn read(path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    let (file, length) = open_regular(path, limit)?;
    let mut bytes = Vec::with_capacity(usize::try_from(length).unwrap_or(0));
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    let size = bytes.len() as u64;
    if size > limit {
        return Err(ReadError::TooLarge { size, limit });
    }
    Ok(bytes)
}

/// The whole regular file at `path` as UTF-8 text, at most `limit` bytes.
pub fn read_to_string(path: &Path, limit: u64) -> Result<String, ReadError> {
    String::from_utf8(read(path, limit)?).map_err(|_| ReadError::NotUtf8)
}

/// What [`atomic_write`] names its temp file: `.<name>.tmp-<pid>` in the target's directory, so
/// that an owner of the directory can recognise a leftover of a crash and whose it was.
pub const TEMP_INFIX: &str = ".tmp-";

/// Why [`atomic_write`] failed: the file or directory the failing step worked on.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {source}")]
pub struct WriteError {
    pub path: PathBuf,
    pub source: io::Error,
}

/// Replaces the file at `path` with `bytes` so that a crash at any point leaves either the old or
/// the new content under `path`: temp file in the same directory, fsync, rename over `path`, fsync
/// the directory (created first when missing). A failed write removes its temp file.
pub fn atomic_write(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    atomic_write_with(path, bytes, |_| Ok(()))
}

/// [`atomic_write`] with a hook between "temp file durable" and "rename", where tests simulate a
/// crash by returning an error: the temp file is then left behind, as a real crash would leave it.
pub fn atomic_write_with(
    path: &Path,
    bytes: &[u8],
    before_rename: impl FnOnce(&Path) -> io::Result<()>,
) -> Result<(), WriteError> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir).map_err(write_error(dir))?;
    let name = path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
    let temp = dir.join(format!(".{name}{TEMP_INFIX}{}", std::process::id()));
    let write = || -> io::Result<()> {
        let mut file = File::create(&temp)?;
        adopt_dir_owner(&file, dir)?;
        file.write_all(bytes)?;
        file.sync_all()
    };
    if let Err(source) = write() {
        // Best effort: the write already failed and says why.
        let _ = std::fs::remove_file(&temp);
        return Err(WriteError { path: temp, source });
    }
    before_rename(&temp).map_err(write_error(&temp))?;
    if let Err(source) = std::fs::rename(&temp, path) {
        let _ = std::fs::remove_file(&temp);
        return Err(WriteError { path: path.to_path_buf(), source });
    }
    File::open(dir).and_then(|dir| dir.sync_all()).map_err(write_error(dir))
}

fn write_error(path: &Path) -> impl FnOnce(io::Error) -> WriteError + '_ {
    move |source| WriteError { path: path.to_path_buf(), source }
}

/// Gives `file`, just created in `dir`, to `dir`'s owner when root writes into a directory that
/// another user owns (the service's dynamic user owns its cache directory once it has run), so
/// that the service can open, lock and replace it. Otherwise leaves it alone.
pub fn adopt_dir_owner(file: &File, dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(());
    }
    let owner = std::fs::metadata(dir)?;
    if owner.uid() == 0 && owner.gid() == 0 {
        return Ok(());
    }
    std::os::unix::fs::fchown(file, Some(owner.uid()), Some(owner.gid()))
}

/// How long [`lock_beside`] waits for another process that holds the lock.
pub const LOCK_WAIT: Duration = Duration::from_secs(5);
/// Pause between two tries of a lock another process holds.
const LOCK_RETRY: Duration = Duration::from_millis(10);

/// Why [`lock_beside`] failed.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("{path}: cannot lock: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{path}: another process has held this lock for {LOCK_WAIT:?}")]
    Busy { path: PathBuf },
}

/// An exclusive lock (`flock`) on `.<name>.lock` beside a file the daemon reads, changes and
/// writes, so that two processes sharing it (two daemons on one state directory) never lose each
/// other's changes. Released when dropped (the descriptor closes).
#[derive(Debug)]
pub struct FileLock {
    _file: File,
}

/// The lock file of the file at `path`: `.<name>.lock` beside it.
pub fn lock_path(path: &Path) -> PathBuf {
    let name = path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
    path.with_file_name(format!(".{name}.lock"))
}

/// Takes the lock of the file at `path`, waiting up to [`LOCK_WAIT`] for another process; creates
/// the file's directory when missing.
pub fn lock_beside(path: &Path) -> Result<FileLock, LockError> {
    let lock = lock_path(path);
    let failed = |source| LockError::Io { path: lock.clone(), source };
    if let Some(dir) = lock.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(failed)?;
    }
    let file = OpenOptions::new().create(true).truncate(false).write(true).open(&lock).map_err(failed)?;
    let started = Instant::now();
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(FileLock { _file: file }),
            Err(std::fs::TryLockError::WouldBlock) if started.elapsed() < LOCK_WAIT => std::thread::sleep(LOCK_RETRY),
            Err(std::fs::TryLockError::WouldBlock) => return Err(LockError::Busy { path: lock }),
            Err(std::fs::TryLockError::Error(source)) => return Err(failed(source)),
        }
    }
}

/// Where a state file of the daemon's own that does not read (the controls file, the zones file)
/// is moved aside to, so that the daemon starts afresh without it and whoever wants can look at
/// it: `<name>.bad-<unix time>` beside it.
pub fn aside_path(path: &Path) -> PathBuf {
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|since| since.as_secs())
        .unwrap_or_default();
    let name = path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
    path.with_file_name(format!("{name}.bad-{seconds}"))
}

/// Removes what writes of the file at `path` killed half-way (`kill -9`, a power cut) left beside
/// it: `.<name>.tmp-<pid>` temp files of [`atomic_write`]. The caller holds the file's lock, so
/// this never removes the temp file of a write in flight; nothing to do when the file's directory
/// does not exist. Returns the files removed.
pub fn remove_temp_leftovers(path: &Path, _lock: &FileLock) -> io::Result<Vec<PathBuf>> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let name = path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
    let prefix = format!(".{name}{TEMP_INFIX}");
    let mut removed = Vec::new();
    for entry in std::fs::read_dir(dir)?.flatten() {
        let leftover = entry
            .file_name()
            .to_string_lossy()
            .strip_prefix(&prefix)
            .is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()));
        if leftover && std::fs::remove_file(entry.path()).is_ok() {
            removed.push(entry.path());
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regular_file_within_the_bound_is_read_whole() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("labels.txt");
        std::fs::write(&path, "person\ncar\n").expect("write");
        assert_eq!(read_to_string(&path, 64).expect("read"), "person\ncar\n");
        assert!(matches!(read(&path, 4), Err(ReadError::TooLarge { size: 11, limit: 4 })));
    }

    #[test]
    fn a_fifo_is_refused_at_once_without_a_writer() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("fifo");
        let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: mkfifo reads the NUL-terminated path for the duration of the call only.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0, "mkfifo");
        let error = read(&fifo, 1024).expect_err("a FIFO is not a file");
        assert_eq!(error.to_string(), "is a FIFO, not a regular file");
    }

    #[test]
    fn devices_and_directories_are_refused_and_a_huge_sparse_file_is_not_read() {
        assert!(matches!(read(Path::new("/dev/zero"), 1024), Err(ReadError::NotRegular("character device"))));
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(matches!(read(dir.path(), 1024), Err(ReadError::NotRegular("directory"))));
        let huge = dir.path().join("huge");
        File::create(&huge).and_then(|file| file.set_len(1 << 40)).expect("sparse file");
        assert!(matches!(read(&huge, MAX_MODEL_BYTES), Err(ReadError::TooLarge { size, .. }) if size == 1 << 40));
        assert!(matches!(read_to_string(Path::new("/nonexistent/x"), 1), Err(ReadError::Io(_))));
    }

    #[test]
    fn text_must_be_utf8() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("password");
        std::fs::write(&path, [0xff, 0xfe, b'\n']).expect("write");
        assert!(matches!(read_to_string(&path, 64), Err(ReadError::NotUtf8)));
    }

    #[test]
    fn atomic_write_replaces_the_file_whole() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("sub").join("k.ptx");
        atomic_write(&path, b"first").expect("write");
        atomic_write(&path, b"second").expect("rewrite");
        assert_eq!(std::fs::read(&path).expect("read"), b"second");
        assert_eq!(std::fs::read_dir(path.parent().expect("parent")).expect("list").count(), 1, "no temp file left");
    }

    #[test]
    fn a_failed_atomic_write_keeps_the_old_file_and_names_what_failed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("zones.toml");
        atomic_write(&path, b"old").expect("write");
        let onto_a_directory = dir.path().join("taken");
        std::fs::create_dir(&onto_a_directory).expect("mkdir");
        std::fs::write(onto_a_directory.join("inside"), b"x").expect("write");
        let error = atomic_write(&onto_a_directory, b"new").expect_err("a directory is not replaced");
        assert_eq!(error.path, onto_a_directory);
        let leftovers = std::fs::read_dir(dir.path())
            .expect("list")
            .flatten()
            .filter(|entry| entry.file_name().to_string_lossy().contains(TEMP_INFIX))
            .count();
        assert_eq!(leftovers, 0, "the failed write removed its temp file");
        assert_eq!(std::fs::read(&path).expect("read"), b"old");
    }

    #[test]
    fn a_file_root_writes_into_another_users_directory_becomes_that_users() {
        use std::os::unix::fs::MetadataExt;
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: only root can give a file away");
            return;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        std::os::unix::fs::chown(dir.path(), Some(65534), Some(65534)).expect("chown dir");
        let path = dir.path().join("model.engine");
        let file = File::create(&path).expect("create");
        adopt_dir_owner(&file, dir.path()).expect("adopt");
        let meta = std::fs::metadata(&path).expect("stat");
        assert_eq!((meta.uid(), meta.gid()), (65534, 65534));
    }

    #[test]
    fn an_atomic_write_by_root_into_another_users_directory_gives_the_file_to_that_user() {
        use std::os::unix::fs::MetadataExt;
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: only root can give a file away");
            return;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        std::os::unix::fs::chown(dir.path(), Some(65534), Some(65534)).expect("chown dir");
        let path = dir.path().join("ssd.timing.cache");
        atomic_write(&path, b"cache").expect("write");
        let meta = std::fs::metadata(&path).expect("stat");
        assert_eq!((meta.uid(), meta.gid()), (65534, 65534));
    }
}
