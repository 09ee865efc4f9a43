//! The controls file (`controls.file`, in the state directory by default): what users switched
//! at run time, so that it survives a restart.
//!
//! Owns: the file's format (TOML: `score_threshold`, then a `[camera.<name>]` table of switches
//! per camera), reading it (bounded, a regular file only; a missing file means nothing was set)
//! and checking it, restoring it at start ([`restore`]: the file is the daemon's own, so one that
//! cannot be read or checked is set aside as `<name>.bad-<unix time>` and the daemon starts from
//! the config's values, rather than staying down; keys it does not know, which a newer daemon
//! wrote, are left out and named rather than costing the whole file; temp files of a save killed
//! half-way are removed), and writing it atomically (`crate::sys::files::atomic_write`) under the lock beside
//! it (`crate::sys::files::lock_beside`): two daemons on one state directory keep each other's
//! cameras. Must not: open anything but that one file, its lock and its directory, or log.

use std::path::{Path, PathBuf};

use toml::{Table, Value};

use super::values::{check_threshold, ControlValues, Switch};
use crate::sys::files::{lock_beside, remove_temp_leftovers, LockError, ReadError};

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
    #[error("the controls file's lock: {0}")]
    Lock(#[from] LockError),
    #[error("{path}: cannot remove what a save cut short left: {source}")]
    Clean { path: PathBuf, source: std::io::Error },
    #[error("{path}: cannot set it aside as {aside}: {source}")]
    SetAside { path: PathBuf, aside: PathBuf, source: std::io::Error },
}

/// What [`restore`] found at start.
#[derive(Debug, Default)]
pub struct Restored {
    /// What users set before; `None` when nothing was, or the file was set aside.
    pub values: Option<ControlValues>,
    /// Keys of the file this daemon does not know (`camera.front.<switch>`: a newer daemon's),
    /// left out of `values`; the next save drops them.
    pub unknown: Vec<String>,
    /// Temp files of saves cut short, removed.
    pub removed: Vec<PathBuf>,
    /// A file that could not be read or checked, and where it went (`None`: it could not be
    /// moved, see `problems`).
    pub set_aside: Option<(ControlsFileError, Option<PathBuf>)>,
    /// What else went wrong; none of it keeps the daemon from starting.
    pub problems: Vec<ControlsFileError>,
}

/// At start, under the file's lock: removes the temp files of saves cut short, then reads the
/// file at `path`. A file that cannot be read or checked is renamed to `<name>.bad-<unix time>`
/// beside it, and the daemon starts from the config's values; nothing here is fatal.
pub fn restore(path: &Path) -> Restored {
    let mut restored = Restored::default();
    let lock = match lock_beside(path) {
        Ok(lock) => Some(lock),
        Err(error) => {
            restored.problems.push(error.into());
            None
        }
    };
    if let Some(lock) = &lock {
        match remove_temp_leftovers(path, lock) {
            Ok(removed) => restored.removed = removed,
            Err(source) => restored.problems.push(ControlsFileError::Clean { path: path.to_path_buf(), source }),
        }
    }
    match read(path) {
        Ok(Some((values, unknown))) => (restored.values, restored.unknown) = (Some(values), unknown),
        Ok(None) => {}
        Err(error) => {
            let aside = crate::sys::files::aside_path(path);
            match std::fs::rename(path, &aside) {
                Ok(()) => restored.set_aside = Some((error, Some(aside))),
                Err(source) => {
                    restored.set_aside = Some((error, None));
                    restored.problems.push(ControlsFileError::SetAside { path: path.to_path_buf(), aside, source });
                }
            }
        }
    }
    restored
}

/// What the file at `path` holds; `None` when there is no file (nothing was set yet). Keys it
/// does not know are left out ([`Restored::unknown`] names them at start).
pub fn load(path: &Path) -> Result<Option<ControlValues>, ControlsFileError> {
    Ok(read(path)?.map(|(values, _unknown)| values))
}

/// What the file at `path` holds, and the keys of it this daemon does not know.
fn read(path: &Path) -> Result<Option<(ControlValues, Vec<String>)>, ControlsFileError> {
    let text = match crate::sys::files::read_to_string(path, MAX_CONTROLS_FILE_BYTES) {
        Ok(text) => text,
        Err(ReadError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(ControlsFileError::Read { path: path.to_path_buf(), source }),
    };
    let invalid = |message: String| ControlsFileError::Invalid { path: path.to_path_buf(), message };
    let mut table: Table = toml::from_str(&text).map_err(|e| invalid(e.message().to_string()))?;
    let unknown = take_unknown_keys(&mut table);
    let values: ControlValues = table.try_into().map_err(|e: toml::de::Error| invalid(e.message().to_string()))?;
    check_threshold(values.score_threshold).map_err(|error| invalid(error.to_string()))?;
    Ok(Some((values, unknown)))
}

/// Removes from `table` the keys this daemon's format does not have, and names them: a newer
/// daemon's switches or settings, which a downgrade must not turn into a lost file. Known keys of
/// the wrong type still fail to read (the file is damaged, not newer).
fn take_unknown_keys(table: &mut Table) -> Vec<String> {
    let mut unknown = Vec::new();
    table.retain(|key, _| {
        let known = key == "score_threshold" || key == "camera";
        if !known {
            unknown.push(key.to_string());
        }
        known
    });
    if let Some(Value::Table(cameras)) = table.get_mut("camera") {
        for (name, camera) in cameras.iter_mut() {
            let Value::Table(switches) = camera else { continue };
            switches.retain(|key, _| {
                let known = Switch::from_name(key).is_some();
                if !known {
                    unknown.push(format!("camera.{name}.{key}"));
                }
                known
            });
        }
    }
    unknown
}

/// Writes `values` to the file at `path`, under its lock: the cameras the file holds that
/// `values` does not name (another daemon's on the same state directory) are kept; a file that
/// does not read is replaced.
pub fn save(path: &Path, values: &ControlValues) -> Result<(), ControlsFileError> {
    let _lock = lock_beside(path)?;
    let mut merged = load(path).ok().flatten().map(|saved| saved.cameras).unwrap_or_default();
    merged.extend(values.cameras.iter().map(|(name, camera)| (name.clone(), *camera)));
    let merged = ControlValues { score_threshold: values.score_threshold, cameras: merged };
    // Plain data (numbers, booleans, tables): serialising it cannot fail.
    let body = toml::to_string(&merged).unwrap_or_default();
    Ok(crate::sys::files::atomic_write(path, format!("{HEADER}\n{body}").as_bytes())?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controls::values::CameraValues;

    #[test]
    fn saved_controls_read_back_and_a_missing_file_is_nothing_set() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state/controls.toml");
        assert!(load(&path).expect("no file").is_none());
        let values = ControlValues {
            score_threshold: 0.45,
            cameras: [(
                "front".to_string(),
                CameraValues { detect: false, snapshots: true, record: true, gating: false },
            )]
            .into(),
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

    #[test]
    fn a_file_written_before_the_gating_switch_reads_with_gating_on() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("controls.toml");
        let text = "score_threshold = 0.5\n[camera.front]\ndetect = true\nsnapshots = false\nrecord = true\n";
        std::fs::write(&path, text).expect("write");
        let values = load(&path).expect("load").expect("a file");
        assert_eq!(
            values.cameras["front"],
            CameraValues { detect: true, snapshots: false, record: true, gating: true }
        );
    }

    #[test]
    fn keys_of_a_newer_daemon_are_left_out_and_named_and_the_rest_is_restored() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("controls.toml");
        let text = "score_threshold = 0.4\nnight_mode = true\n[camera.front]\ndetect = false\nsnapshots = true\n\
                    record = true\ngating = false\nzoom = 2\n";
        std::fs::write(&path, text).expect("write");
        let restored = restore(&path);
        assert!(restored.set_aside.is_none() && restored.problems.is_empty(), "{restored:?}");
        assert_eq!(restored.unknown, ["night_mode", "camera.front.zoom"]);
        let values = restored.values.expect("restored");
        assert_eq!(values.score_threshold, 0.4);
        assert_eq!(
            values.cameras["front"],
            CameraValues { detect: false, snapshots: true, record: true, gating: false }
        );
        assert!(path.exists(), "the file stays where it is");
    }

    #[test]
    fn a_bad_file_is_set_aside_at_start_and_the_config_values_apply() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("controls.toml");
        std::fs::write(&path, "score_threshold = \"high\"\n").expect("write");
        std::fs::write(dir.path().join(".controls.toml.tmp-4242"), "cut short").expect("write");
        let restored = restore(&path);
        assert!(restored.values.is_none() && restored.problems.is_empty(), "{restored:?}");
        let (error, aside) = restored.set_aside.expect("set aside");
        assert!(error.to_string().contains("controls.toml"), "{error}");
        let aside = aside.expect("moved");
        assert!(aside.file_name().unwrap().to_string_lossy().starts_with("controls.toml.bad-"), "{aside:?}");
        assert_eq!(std::fs::read_to_string(&aside).expect("kept"), "score_threshold = \"high\"\n");
        assert!(!path.exists());
        assert_eq!(restored.removed, [dir.path().join(".controls.toml.tmp-4242")]);
        assert!(restore(&path).values.is_none(), "no file now: nothing set");
    }

    #[test]
    fn a_save_keeps_the_cameras_of_another_daemon_on_the_same_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("controls.toml");
        let camera = |detect| CameraValues { detect, snapshots: true, record: true, gating: true };
        let other = ControlValues { score_threshold: 0.4, cameras: [("back".to_string(), camera(false))].into() };
        save(&path, &other).expect("save");
        let ours = ControlValues { score_threshold: 0.6, cameras: [("front".to_string(), camera(true))].into() };
        save(&path, &ours).expect("save");
        let saved = load(&path).expect("load").expect("a file");
        assert_eq!(saved.score_threshold, 0.6);
        assert_eq!(saved.cameras, [("back".to_string(), camera(false)), ("front".to_string(), camera(true))].into());
    }
}
