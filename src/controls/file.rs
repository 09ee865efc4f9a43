//! The controls file (`controls.file`, in the state directory by default): what users switched
//! at run time, so that it survives a restart.
//!
//! Owns: the file's format (TOML: `score_threshold`, then a `[camera.<name>]` table of switches
//! per camera), reading it (bounded, a regular file only; a missing file means nothing was set)
//! and checking it, and writing it atomically (`crate::sys::files::atomic_write`). Must not:
//! open anything but that one file and its directory.

use std::path::{Path, PathBuf};

use super::ControlValues;
use crate::sys::files::ReadError;

/// Largest controls file read: 64 cameras take a few KiB.
pub const MAX_CONTROLS_FILE_BYTES: u64 = 1 << 20;

const HEADER: &str = "\
# Controls of jetson-detectd set at run time (Home Assistant's switches and number, or the HTTP API
# /api/controls): they override the config's values at every start until changed again. Written by
# the daemon; delete the file to go back to the config's values.
";

#[derive(Debug, thiserror::Error)]
pub enum ControlsFileError {
    #[error("{path}: {source}")]
    Read { path: PathBuf, source: ReadError },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error("cannot write the controls file: {0}")]
    Write(#[from] crate::sys::files::WriteError),
}

/// What the file at `path` holds; `None` when there is no file (nothing was set yet).
pub fn load(path: &Path) -> Result<Option<ControlValues>, ControlsFileError> {
    let text = match crate::sys::files::read_to_string(path, MAX_CONTROLS_FILE_BYTES) {
        Ok(text) => text,
        Err(ReadError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(ControlsFileError::Read { path: path.to_path_buf(), source }),
    };
    let invalid = |message: String| ControlsFileError::Invalid { path: path.to_path_buf(), message };
    let values: ControlValues = toml::from_str(&text).map_err(|e| invalid(e.message().to_string()))?;
    if !(0.0..=1.0).contains(&values.score_threshold) {
        return Err(invalid(format!("score_threshold {} is outside 0.0..=1.0", values.score_threshold)));
    }
    Ok(Some(values))
}

/// Replaces the file at `path` with `values`.
pub fn save(path: &Path, values: &ControlValues) -> Result<(), ControlsFileError> {
    // Plain data (numbers, booleans, tables): serialising it cannot fail.
    let body = toml::to_string(values).unwrap_or_default();
    Ok(crate::sys::files::atomic_write(path, format!("{HEADER}\n{body}").as_bytes())?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controls::CameraValues;

    #[test]
    fn saved_controls_read_back_and_a_missing_file_is_nothing_set() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state/controls.toml");
        assert!(load(&path).expect("no file").is_none());
        let values = ControlValues {
            score_threshold: 0.45,
            cameras: [("front".to_string(), CameraValues { detect: false, snapshots: true, record: true })].into(),
        };
        save(&path, &values).expect("save");
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(text.starts_with("# Controls of jetson-detectd"), "{text}");
        assert!(text.contains("[camera.front]\ndetect = false\n"), "{text}");
        assert_eq!(load(&path).expect("load"), Some(values));
    }

    #[test]
    fn a_bad_file_is_refused_naming_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("controls.toml");
        std::fs::write(&path, "score_threshold = 2.0\n").expect("write");
        let error = load(&path).expect_err("out of range").to_string();
        assert!(error.contains("controls.toml") && error.contains("0.0..=1.0"), "{error}");
        std::fs::write(&path, "score_threshold = 0.5\n[camera.front]\ndetect = \"yes\"\n").expect("write");
        assert!(load(&path).is_err());
    }
}
