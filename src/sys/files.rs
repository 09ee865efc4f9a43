//! Opening and reading files that a config or a command line names: the config itself, label
//! files, password and PEM files, models and image files.
//!
//! Owns: the rule that such a path is opened without blocking (`O_NONBLOCK`, so a FIFO can never
//! hang the caller), must be a regular file (a directory, FIFO, socket or device such as
//! `/dev/zero` is refused before a byte is read), and is read with a size bound, both from its
//! length and while reading (a file that grows under us is still cut off). The bounds below are
//! documented in the README's "Untrusted input limits". Must not: know what the bytes mean, name
//! config keys (callers add the key and path to the error), or log.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

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
}
