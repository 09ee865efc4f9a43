//! The zones file: the zones, lines and motion masks saved from the web page, merged over the config.
//!
//! Owns: the file's format (the config's own `[[camera]]` shape holding only `name`, `[[camera.zone]]`
//! and `[[camera.line]]`, and `masks`), reading it (bounded, a regular file only; a missing file is
//! empty), checking it exactly as the config checks zones, lines and masks ([`parse_scene`],
//! [`parse_masks`]), merging it over the configured cameras (the zones and lines of every camera it
//! names replace the config's; its `masks`, where it has them, replace the camera's
//! `[motion.camera.<name>].masks`: `Config::masks_from_file`; cameras it names that the config
//! lacks are kept in the file and ignored), and writing it
//! atomically (temp file in the same directory, fsync, rename, fsync of the directory: a power cut
//! leaves the old or the new file, never a torn one). A save reads, changes and writes the file
//! under a lock on `.<name>.lock` beside it ([`ZonesFile::update`]), so processes sharing the file
//! never overwrite each other's cameras, and the temp files of a save killed half-way are removed
//! under that lock at start ([`remove_leftovers`]). What the page saved never stops a start
//! ([`apply_at_start`]): a file that does not read is not applied (and `run` sets it aside,
//! [`set_aside`], so that the page can save again), and a camera whose zones from the file lack a
//! zone its `record.zones` names keeps the config's; each is a [`ZonesFileProblem`] that says the
//! way back. Must not: open anything but that file, its lock and its directory; it knows no HTTP
//! and no camera beyond its name.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::sys::files::{lock_beside, remove_temp_leftovers, LockError, ReadError};

use super::camera::{CameraConfig, LineConfig, ZoneConfig};
use super::error::ConfigError;
use super::origin::ConfigOrigin;
use super::scene::{parse_masks, parse_scene, MaskPoints};

/// Each camera's motion masks saved from the page, by camera name: `Config::masks_from_file`.
pub type SavedMasks = std::collections::BTreeMap<String, Vec<MaskPoints>>;

/// Largest zones file read: 64 cameras × 64 zones of 64 points fit many times over.
pub const MAX_ZONES_FILE_BYTES: u64 = 4 << 20;

const HEADER: &str = "\
# Zones and lines saved from jetson-detectd's web page. For every camera named here they replace the
# camera's [[camera.zone]] and [[camera.line]] tables of the config (same keys, fractions of the
# frame), and its `masks`, where present, replace its [motion.camera.<name>] masks. Written by the
# daemon; `jetson-detectd check-config --print` shows the merged zones and lines.
";

/// One camera's zones, lines and motion masks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CameraScene {
    pub name: String,
    /// Motion masks (polygons in frame fractions) that replace the camera's
    /// `[motion.camera.<name>].masks`; absent: the config's apply. Only the page sets them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub masks: Option<Vec<MaskPoints>>,
    #[serde(default, rename = "zone")]
    pub zones: Vec<ZoneConfig>,
    #[serde(default, rename = "line")]
    pub lines: Vec<LineConfig>,
}

/// The whole file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ZonesFile {
    #[serde(default, rename = "camera")]
    pub cameras: Vec<CameraScene>,
}

/// A camera whose zones and lines the zones file replaced, with how many of each the config had and
/// the file has: `run` logs it and `check-config` says it, since the config then no longer shows
/// what the daemon runs with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZonesFromFile {
    pub camera: String,
    pub config_zones: usize,
    pub config_lines: usize,
    pub zones: usize,
    pub lines: usize,
}

impl ZonesFromFile {
    /// One line for the log and `check-config`, naming the zones file `path`.
    pub fn describe(&self, path: &Path) -> String {
        format!(
            "camera {:?}: the zones file {} (saved from the web page) replaces the config's zones and lines \
             ({} zone(s), {} line(s) in the config; {} zone(s), {} line(s) in the file); \
             `check-config --print` shows the result",
            self.camera,
            path.display(),
            self.config_zones,
            self.config_lines,
            self.zones,
            self.lines
        )
    }
}

/// What of the zones file is not applied at start, and why; the config's zones and lines apply
/// instead. `run` logs it as an error, `check-config` says it as a warning: neither stops.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ZonesFileProblem {
    /// The file does not read or parse: none of it applies.
    Unusable { message: String },
    /// A camera's zones in the file lack `zone`, which the config's `key` (`camera[<i>].record.zones`)
    /// names: that camera keeps the config's zones and lines.
    MissingRecordZone { camera: String, key: String, zone: String },
}

impl ZonesFileProblem {
    /// One line for the log and `check-config`: what is not applied, why, and the way back.
    pub fn describe(&self, path: &Path) -> String {
        match self {
            // The error last: a parse error's own lines (the line and a caret) follow it.
            ZonesFileProblem::Unusable { message } => format!(
                "the zones file {} (saved from the web page) is not applied, every camera runs with the config's \
                 zones and lines, and `run` moves it aside to {}.bad-<unix time> so that the page can save again \
                 (fix it and move it back, or leave it): {message}",
                path.display(),
                path.display()
            ),
            ZonesFileProblem::MissingRecordZone { camera, key, zone } => format!(
                "camera {camera:?}: the zones file {} (saved from the web page) is not applied to it: its zones \
                 there lack {zone:?}, which the config's `{key}` names; it runs with the config's zones and lines. \
                 Save its zones from the page again (with a zone {zone:?}), or change `{key}`",
                path.display()
            ),
        }
    }
}

/// The zones file at `path` over `cameras` and into `masks`, as far as it fits (module doc):
/// which cameras it changed, and what of it was not applied.
pub fn apply_at_start(
    path: &Path,
    cameras: &mut [CameraConfig],
    masks: &mut SavedMasks,
) -> (Vec<ZonesFromFile>, Vec<ZonesFileProblem>) {
    masks.clear();
    let file = match ZonesFile::load(path) {
        Ok(file) => file,
        Err(error) => return (Vec::new(), vec![ZonesFileProblem::Unusable { message: error.to_string() }]),
    };
    let mut problems = Vec::new();
    let fitting = file
        .cameras
        .into_iter()
        .filter(|scene| {
            let Some((i, camera)) = cameras.iter().enumerate().find(|(_, camera)| camera.name == scene.name) else {
                return true;
            };
            let Some(zone) = camera.record_zone_missing_from(&scene.zones) else { return true };
            problems.push(ZonesFileProblem::MissingRecordZone {
                camera: camera.name.clone(),
                key: format!("camera[{i}].record.zones"),
                zone: zone.to_owned(),
            });
            false
        })
        .collect();
    (ZonesFile { cameras: fitting }.apply(cameras, masks), problems)
}

/// Moves the zones file at `path` aside, to `<name>.bad-<unix time>` beside it, under the save
/// lock: a file that does not read would refuse every save from the page. Returns the new path.
pub fn set_aside(path: &Path) -> Result<PathBuf, SaveError> {
    let _lock = lock_beside(path)?;
    let aside = crate::sys::files::aside_path(path);
    std::fs::rename(path, &aside).map_err(|source| SaveError::Clean { path: path.to_path_buf(), source })?;
    Ok(aside)
}

#[derive(Debug, thiserror::Error)]
#[error("{path}: cannot write the zones file: {source}")]
pub struct WriteError {
    pub path: PathBuf,
    pub source: std::io::Error,
}

/// Why a save ([`ZonesFile::update`]) or the clean-up at start ([`remove_leftovers`]) failed.
#[derive(Debug, thiserror::Error)]
pub enum SaveError {
    #[error("the zones file's lock: {0}")]
    Lock(#[from] LockError),
    #[error("{path}: {source}")]
    Clean { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Read(#[from] ConfigError),
    #[error(transparent)]
    Write(#[from] WriteError),
}

/// Removes what saves killed half-way (`kill -9`, a power cut) left next to the zones file at
/// `path`: `.<name>.tmp-<pid>` temp files, under the save lock
/// ([`crate::sys::files::remove_temp_leftovers`]); nothing to do (and nothing created) when the
/// file's directory does not exist. Returns the files removed.
pub fn remove_leftovers(path: &Path) -> Result<Vec<PathBuf>, SaveError> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let lock = lock_beside(path)?;
    remove_temp_leftovers(path, &lock).map_err(|source| SaveError::Clean { path: dir.to_path_buf(), source })
}

impl ZonesFile {
    /// Reads and checks `path`; a file that does not exist is an empty zones file.
    pub fn load(path: &Path) -> Result<ZonesFile, ConfigError> {
        let origin = ConfigOrigin::File(path.to_path_buf());
        let text = match crate::sys::files::read_to_string(path, MAX_ZONES_FILE_BYTES) {
            Ok(text) => text,
            Err(ReadError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => return Ok(ZonesFile::default()),
            Err(source) => return Err(ConfigError::Read { origin, source }),
        };
        Self::parse(&text, origin)
    }

    /// Parses and checks the file's text; errors name `origin` and the key (`camera[0].zone[1].polygon`).
    pub fn parse(text: &str, origin: ConfigOrigin) -> Result<ZonesFile, ConfigError> {
        let table: toml::Table =
            toml::from_str(text).map_err(|e| ConfigError::Parse { origin: origin.clone(), message: e.to_string() })?;
        let file: ZonesFile =
            serde_path_to_error::deserialize(toml::Value::Table(table)).map_err(|error| ConfigError::Invalid {
                origin: origin.clone(),
                key: error.path().to_string(),
                message: error.into_inner().message().trim_end().to_string(),
            })?;
        let invalid = |key: String, message: String| ConfigError::Invalid { origin: origin.clone(), key, message };
        let mut names = std::collections::BTreeSet::new();
        for (i, camera) in file.cameras.iter().enumerate() {
            if !names.insert(camera.name.as_str()) {
                return Err(invalid(format!("camera[{i}].name"), format!("{:?} is named twice", camera.name)));
            }
            parse_scene(&camera.name, &camera.zones, &camera.lines)
                .map_err(|e| invalid(format!("camera[{i}].{}", e.key), e.message))?;
            parse_masks(&camera.name, camera.masks.as_deref().unwrap_or_default())
                .map_err(|e| invalid(format!("camera[{i}].{}", e.key), e.message))?;
        }
        Ok(file)
    }

    /// Replaces the zones and lines of every configured camera this file names, and puts the masks
    /// it has for them into `masks`; says which.
    pub fn apply(&self, cameras: &mut [CameraConfig], masks: &mut SavedMasks) -> Vec<ZonesFromFile> {
        let mut applied = Vec::new();
        for scene in &self.cameras {
            if let Some(camera) = cameras.iter_mut().find(|camera| camera.name == scene.name) {
                applied.push(ZonesFromFile {
                    camera: camera.name.clone(),
                    config_zones: camera.zones.len(),
                    config_lines: camera.lines.len(),
                    zones: scene.zones.len(),
                    lines: scene.lines.len(),
                });
                camera.zones.clone_from(&scene.zones);
                camera.lines.clone_from(&scene.lines);
                if let Some(saved) = &scene.masks {
                    masks.insert(scene.name.clone(), saved.clone());
                }
            }
        }
        applied
    }

    /// Refuses a zone label `known` does not know (the label file's) in the zones of a configured
    /// camera, naming this file (`path`), the key in it, the camera and the zone: the zones came
    /// from here, not from the config.
    pub fn check_labels(
        &self,
        path: &Path,
        cameras: &[CameraConfig],
        known: impl Fn(&str) -> bool,
    ) -> Result<(), ConfigError> {
        let configured = |name: &str| cameras.iter().any(|camera| camera.name == name);
        for (i, scene) in self.cameras.iter().enumerate().filter(|(_, scene)| configured(&scene.name)) {
            for (j, zone) in scene.zones.iter().enumerate() {
                if let Some(label) = zone.labels.iter().find(|label| !known(label)) {
                    return Err(ConfigError::Invalid {
                        origin: ConfigOrigin::File(path.to_path_buf()),
                        key: format!("camera[{i}].zone[{j}].labels"),
                        message: format!(
                            "camera {:?}, zone {:?} (saved from the web page): {label:?} is not in the label file",
                            scene.name, zone.name
                        ),
                    });
                }
            }
        }
        Ok(())
    }

    /// Reads the file at `path`, applies `change` and writes it back, under the save lock: a save
    /// of another process (a second daemon on the same state directory) in between is never lost.
    /// Returns the file as written.
    pub fn update(path: &Path, change: impl FnOnce(&mut ZonesFile)) -> Result<ZonesFile, SaveError> {
        let _lock = lock_beside(path)?;
        let mut file = ZonesFile::load(path)?;
        change(&mut file);
        file.write(path)?;
        Ok(file)
    }

    /// Sets one camera's zones, lines and masks (replacing what the file held for it).
    pub fn set(&mut self, scene: CameraScene) {
        match self.cameras.iter_mut().find(|camera| camera.name == scene.name) {
            Some(camera) => *camera = scene,
            None => self.cameras.push(scene),
        }
    }

    /// The file's text: a comment saying what it is, then the cameras.
    pub fn to_toml(&self) -> String {
        // Plain data (strings, numbers, arrays): serialising it cannot fail.
        let body = toml::to_string(self).unwrap_or_default();
        format!("{HEADER}\n{body}")
    }

    /// Replaces the file at `path` atomically, creating its directory when missing.
    pub fn write(&self, path: &Path) -> Result<(), WriteError> {
        crate::sys::files::atomic_write(path, self.to_toml().as_bytes())
            .map_err(|error| WriteError { path: path.into(), source: error.source })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lane() -> CameraScene {
        CameraScene {
            name: "front".into(),
            zones: vec![ZoneConfig {
                name: "lane".into(),
                polygon: vec![[0.0, 0.62], [1.0, 0.62], [1.0, 1.0], [0.0, 1.0]],
                labels: vec!["person".into()],
            }],
            lines: vec![LineConfig { name: "gate".into(), points: [[0.5, 1.0], [0.5, 0.2]] }],
            masks: None,
        }
    }

    #[test]
    fn a_written_file_reads_back_the_same_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/zones.toml");
        let mut file = ZonesFile::default();
        file.set(lane());
        file.write(&path).unwrap();
        assert_eq!(ZonesFile::load(&path).unwrap(), file);
        let entries: Vec<_> =
            std::fs::read_dir(path.parent().unwrap()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(entries, ["zones.toml"]);
    }

    #[test]
    fn a_missing_file_is_empty_and_setting_a_camera_twice_keeps_one_entry() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = ZonesFile::load(&dir.path().join("absent.toml")).unwrap();
        assert!(file.cameras.is_empty());
        file.set(lane());
        file.set(CameraScene { zones: Vec::new(), ..lane() });
        assert_eq!(file.cameras.len(), 1);
        assert!(file.cameras[0].zones.is_empty());
    }

    #[test]
    fn a_bad_zone_in_the_file_names_the_file_and_the_key() {
        let text =
            "[[camera]]\nname = \"front\"\n[[camera.zone]]\nname = \"lane\"\npolygon = [[0.0, 0.0], [1.0, 0.0]]\n";
        let error = ZonesFile::parse(text, ConfigOrigin::File("/state/zones.toml".into())).unwrap_err().to_string();
        assert!(error.starts_with("/state/zones.toml: `camera[0].zone[0].polygon`"), "{error}");
        assert!(error.contains("at least 3 points"), "{error}");
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("zones.toml");
        let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo has no other preconditions.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        let error = ZonesFile::load(&path).unwrap_err().to_string();
        assert!(error.contains("FIFO, not a regular file"), "{error}");
    }

    /// Issue 35: two daemons on one zones file lost each other's cameras (both saves answered 200).
    #[test]
    fn concurrent_saves_of_different_cameras_keep_every_camera() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/zones.toml");
        let savers: Vec<_> = (0..6)
            .map(|i| {
                let path = path.clone();
                std::thread::spawn(move || {
                    for _ in 0..10 {
                        ZonesFile::update(&path, |file| file.set(CameraScene { name: format!("camera{i}"), ..lane() }))
                            .unwrap();
                    }
                })
            })
            .collect();
        savers.into_iter().for_each(|saver| saver.join().unwrap());
        assert_eq!(ZonesFile::load(&path).unwrap().cameras.len(), 6);
    }

    /// Issue 35: `kill -9` in the middle of a save left `.zones.toml.tmp-<pid>` files for good.
    #[test]
    fn leftovers_of_a_save_cut_short_are_removed_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("zones.toml");
        assert!(remove_leftovers(&dir.path().join("absent/zones.toml")).unwrap().is_empty());
        assert!(!dir.path().join("absent").exists(), "nothing is created for a clean-up");
        for name in [".zones.toml.tmp-123", ".zones.toml.tmp-4567", ".zones.toml.tmp-x", "zones.toml", "other.tmp-1"] {
            std::fs::write(dir.path().join(name), b"").unwrap();
        }
        let mut removed = remove_leftovers(&path).unwrap();
        removed.sort();
        assert_eq!(removed, [dir.path().join(".zones.toml.tmp-123"), dir.path().join(".zones.toml.tmp-4567")]);
        assert!(path.exists() && dir.path().join(".zones.toml.tmp-x").exists());
    }

    /// Issue 35: a zones-file label missing from the label file named the config file.
    #[test]
    fn a_label_the_label_file_lacks_names_the_zones_file_the_camera_and_the_zone() {
        let mut file = ZonesFile::default();
        file.set(CameraScene { name: "gone".into(), ..lane() });
        file.set(lane());
        let cameras = [camera("front")];
        let path = Path::new("/state/zones.toml");
        file.check_labels(path, &cameras, |label| label == "person").expect("known labels");
        let error = file.check_labels(path, &cameras, |_| false).unwrap_err().to_string();
        assert!(error.starts_with("/state/zones.toml: `camera[1].zone[0].labels`"), "{error}");
        assert!(error.contains("camera \"front\", zone \"lane\"") && error.contains("\"person\""), "{error}");
        let unconfigured = ZonesFile { cameras: vec![CameraScene { name: "gone".into(), ..lane() }] };
        unconfigured.check_labels(path, &cameras, |_| false).expect("a camera the config lacks is ignored");
    }

    fn camera(name: &str) -> CameraConfig {
        CameraConfig {
            name: name.into(),
            source: crate::source::config::SourceConfig::Synthetic(crate::source::kinds::synthetic::SyntheticConfig {
                width: 64,
                height: 64,
            }),
            fps: 0.0,
            zones: Vec::new(),
            lines: vec![LineConfig { name: "old".into(), points: [[0.0, 0.0], [1.0, 1.0]] }],
            record: None,
            model: None,
        }
    }

    #[test]
    fn at_start_a_camera_whose_file_zones_lack_its_recorded_zone_keeps_the_configs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("zones.toml");
        let mut file = ZonesFile::default();
        file.set(lane());
        file.set(CameraScene { name: "back".into(), ..lane() });
        file.write(&path).unwrap();
        let drive =
            ZoneConfig { name: "drive".into(), polygon: vec![[0.0, 0.0], [1.0, 0.0], [1.0, 1.0]], labels: vec![] };
        let mut front = camera("front");
        front.zones = vec![drive.clone()];
        front.record =
            Some(super::super::record::CameraRecordConfig { zones: vec!["drive".into()], ..Default::default() });
        let mut cameras = vec![front, camera("back")];
        let (applied, problems) = apply_at_start(&path, &mut cameras, &mut SavedMasks::new());
        assert_eq!(applied.iter().map(|a| a.camera.as_str()).collect::<Vec<_>>(), ["back"]);
        assert_eq!(cameras[0].zones, [drive], "front keeps the config's zones");
        assert_eq!(cameras[1].zones, lane().zones);
        assert_eq!(
            problems,
            [ZonesFileProblem::MissingRecordZone {
                camera: "front".into(),
                key: "camera[0].record.zones".into(),
                zone: "drive".into()
            }]
        );
        let line = problems[0].describe(&path);
        assert!(line.contains(&path.display().to_string()) && line.contains("Save its zones from the page"), "{line}");
    }

    #[test]
    fn at_start_a_file_that_does_not_parse_is_not_applied_and_can_be_set_aside() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("zones.toml");
        std::fs::write(&path, "[[camera]\n").unwrap();
        let mut cameras = vec![camera("front")];
        let mut masks = SavedMasks::from([("front".to_string(), Vec::new())]);
        let (applied, problems) = apply_at_start(&path, &mut cameras, &mut masks);
        assert!(applied.is_empty() && masks.is_empty());
        assert!(matches!(&problems[..], [ZonesFileProblem::Unusable { message }] if message.contains("zones.toml")));
        assert_eq!(cameras[0].lines[0].name, "old");
        let aside = set_aside(&path).unwrap();
        assert!(!path.exists() && aside.file_name().unwrap().to_string_lossy().starts_with("zones.toml.bad-"));
        assert!(ZonesFile::update(&path, |file| file.set(lane())).is_ok(), "saves work again");
    }

    #[test]
    fn applying_replaces_only_the_named_cameras_scenes() {
        let mut cameras = vec![camera("front"), camera("back")];
        let mut file = ZonesFile::default();
        file.set(lane());
        file.set(CameraScene { name: "gone".into(), zones: Vec::new(), lines: Vec::new(), masks: Some(Vec::new()) });
        let mut masks = SavedMasks::new();
        let applied = file.apply(&mut cameras, &mut masks);
        assert!(masks.is_empty(), "front has no masks in the file, gone is not configured");
        assert_eq!(
            applied,
            [ZonesFromFile { camera: "front".into(), config_zones: 0, config_lines: 1, zones: 1, lines: 1 }],
            "only the configured camera the file names"
        );
        let line = applied[0].describe(Path::new("/var/lib/jetson-detectd/zones.toml"));
        assert!(line.contains("\"front\"") && line.contains("/var/lib/jetson-detectd/zones.toml"), "{line}");
        assert_eq!(cameras[0].zones, lane().zones);
        assert_eq!(cameras[0].lines, lane().lines);
        assert_eq!(cameras[1].lines[0].name, "old");
    }

    #[test]
    fn masks_saved_from_the_page_read_back_and_replace_only_their_cameras_masks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("zones.toml");
        let mask = vec![[0.0, 0.0], [0.4, 0.0], [0.4, 0.3], [0.0, 0.3]];
        let mut file = ZonesFile::default();
        file.set(CameraScene { masks: Some(vec![mask.clone()]), ..lane() });
        file.set(CameraScene { name: "back".into(), ..lane() });
        file.write(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("masks = [["), "{text}");
        assert_eq!(ZonesFile::load(&path).unwrap(), file);
        let mut cameras = vec![camera("front"), camera("back")];
        let mut masks = SavedMasks::new();
        let (applied, problems) = apply_at_start(&path, &mut cameras, &mut masks);
        assert_eq!((applied.len(), problems.len()), (2, 0));
        assert_eq!(masks, SavedMasks::from([("front".to_string(), vec![mask])]), "back keeps the config's masks");
    }

    #[test]
    fn a_bad_mask_in_the_file_names_the_file_and_the_key() {
        let text =
            "[[camera]]\nname = \"front\"\nmasks = [[[0.0, 0.0], [1.0, 0.0], [1.0, 1.0]], [[0.0, 0.0], [1.0, 0.0]]]\n";
        let error = ZonesFile::parse(text, ConfigOrigin::File("/state/zones.toml".into())).unwrap_err().to_string();
        assert!(error.starts_with("/state/zones.toml: `camera[0].masks[1]`"), "{error}");
        assert!(error.contains("at least 3 points"), "{error}");
    }
}
