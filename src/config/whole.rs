//! [`Config`]: the whole configuration as the daemon holds it — the core's tables, each typed in
//! its file beside this one, and the tables components own ([`Sections`]), each one a [`Section`]:
//! the seam a component's table plugs into, which checks itself against the whole (Home
//! Assistant's ids depend on the cameras' zones). The two refer to each other, so they live
//! together. Must not: read or check a config (`load`, `validate` and each section's checks do).

use std::any::Any;
use std::fmt;
use std::path::PathBuf;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use toml::Value;

use super::camera::CameraConfig;
use super::controls::ControlsConfig;
use super::device::DeviceConfig;
use super::engine::EngineConfig;
use super::error::ConfigError;
use super::http::HttpConfig;
use super::merge::Resolve;
use super::model::ModelConfig;
use super::origin::ConfigOrigin;
use super::snapshot::SnapshotConfig;
use super::telemetry::TelemetryConfig;
use super::tracking::TrackingConfig;
use super::{models, record, reid, zones_file};
use crate::source::config::SourceConfig;
use crate::source::limits::LimitsConfig;

/// The core's part of the built-in default, documented (each component's section follows it:
/// [`Schema::default_text`](super::section::Schema::default_text)), as read: the documentation of
/// each kind of camera source stands at [`SOURCE_KINDS_MARK`] ([`core_defaults_text`]).
pub const CORE_DEFAULTS: &str = include_str!("defaults.toml");

/// The line of [`CORE_DEFAULTS`] where the registered source kinds document themselves.
const SOURCE_KINDS_MARK: &str = "# {source kinds}\n";

/// [`CORE_DEFAULTS`] as printed: with each source kind's lines in place of [`SOURCE_KINDS_MARK`]
/// (the kinds own their documentation: `crate::source::kinds`).
pub fn core_defaults_text() -> String {
    CORE_DEFAULTS.replacen(SOURCE_KINDS_MARK, &SourceConfig::documentation(), 1)
}

/// The whole configuration, validated.
///
/// Defaults: the user's file is merged over the built-in default ([`CORE_DEFAULTS`] and each
/// section's) before it is deserialised, so a field here needs no serde default — its line in the
/// default's text is the default.
/// Only keys the default leaves commented out are `Option`s, and keys inside `[[camera]]` tables
/// (arrays replace rather than merge) carry serde defaults documented in that file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub device: DeviceConfig,
    pub model: ModelConfig,
    pub engine: EngineConfig,
    pub limits: LimitsConfig,
    #[serde(rename = "camera")]
    pub cameras: Vec<CameraConfig>,
    pub telemetry: TelemetryConfig,
    pub snapshot: SnapshotConfig,
    pub tracking: TrackingConfig,
    pub http: HttpConfig,
    pub controls: ControlsConfig,
    pub record: record::RecordConfig,
    pub reid: reid::ReidConfig,
    /// `[models.<name>]`: detectors that cameras name, and classifiers of their detections.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub models: models::NamedModels,
    /// Where the config came from (not a TOML key).
    #[serde(skip, default = "embedded_origin")]
    pub origin: ConfigOrigin,
    /// The cameras whose zones and lines `http.zones_file` replaced (not a TOML key).
    #[serde(skip)]
    pub zones_from_file: Vec<zones_file::ZonesFromFile>,
    /// What of `http.zones_file` was not applied, and why (not a TOML key).
    #[serde(skip)]
    pub zones_file_problems: Vec<zones_file::ZonesFileProblem>,
    /// Each camera's motion masks saved from the page (`http.zones_file`), which replace its
    /// `[motion.camera.<name>].masks` (not a TOML key; `crate::infer::gating::config` applies the rule).
    #[serde(skip)]
    pub masks_from_file: zones_file::SavedMasks,
    /// The tables components own (`[mqtt]`, `[[webhook]]`, ...), as the `Schema` the
    /// config was read with registered them; each is found by its type.
    #[serde(skip)]
    pub sections: Sections,
    /// The kinds of per-track model the config was read with (its `Schema`'s; not a TOML key).
    #[serde(skip)]
    pub per_track_roles: Vec<models::PerTrackRole>,
}

fn embedded_origin() -> ConfigOrigin {
    ConfigOrigin::Embedded
}

/// A table of the config that a component owns.
pub trait Section: Clone + fmt::Debug + Serialize + DeserializeOwned + Send + Sync + 'static {
    /// Its key: `mqtt` for `[mqtt]`, `webhook` for `[[webhook]]`.
    const KEY: &'static str;
    /// Its part of the built-in default, commented: every key with its default value and what it
    /// means (`docs/gen.py` makes the reference from it). A section whose text sets no key of its
    /// own is absent until a user's config writes it.
    const DEFAULTS: &'static str;
    /// The keys of it that a reload (SIGHUP) applies, whole (`mqtt.publish`).
    const RELOADABLE: &'static [&'static str] = &[];

    /// Resolves the relative paths it holds ([`Resolve`]).
    fn resolve_paths(&mut self, _resolve: &mut Resolve<'_>) {}

    /// Checks its values against each other and the rest of `config` (which has passed its own
    /// checks); an error names the key ([`Config::invalid`]).
    fn validate(&self, _config: &Config) -> Result<(), ConfigError> {
        Ok(())
    }

    /// The secret files it names, each with its key (`mqtt.password_file`): what
    /// `super::secrets` checks the way the service will read them.
    fn secret_files(&self) -> Vec<(String, PathBuf)> {
        Vec::new()
    }

    /// Leaves out the secret at `key` (one of [`Section::secret_files`]): the component then runs
    /// without it (`check-config` checks the rest as this user).
    fn forget_secret(&mut self, _key: &str) {}

    /// The section a reload leaves running: this one with the [`Section::RELOADABLE`] keys taken
    /// from `reloaded`.
    fn reloaded(&self, _reloaded: &Self) -> Self {
        self.clone()
    }

    /// What `check-config --print` shows: computed defaults filled in (MQTT's client id and topic
    /// prefix come from the device id).
    fn effective(&self, _config: &Config) -> Self {
        self.clone()
    }
}

/// A section as [`Sections`] keeps it: [`Section`] without its type.
pub(super) trait Held: fmt::Debug + Send + Sync {
    fn key(&self) -> &'static str;
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
    fn clone_box(&self) -> Box<dyn Held>;
    fn to_value(&self) -> Result<Value, String>;
    fn effective_text(&self, config: &Config) -> Result<String, String>;
    fn validate(&self, config: &Config) -> Result<(), ConfigError>;
    fn secret_files(&self) -> Vec<(String, PathBuf)>;
    fn forget_secret(&mut self, key: &str);
    fn reloaded(&self, reloaded: &dyn Held) -> Box<dyn Held>;
    fn reloadable(&self) -> &'static [&'static str];
}

impl<T: Section> Held for T {
    fn key(&self) -> &'static str {
        T::KEY
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }

    fn clone_box(&self) -> Box<dyn Held> {
        Box::new(self.clone())
    }

    fn to_value(&self) -> Result<Value, String> {
        Value::try_from(self).map_err(|e| e.to_string())
    }

    /// `[KEY]` and its keys as TOML text, numbers as written (through `f64`, an `f32` such as
    /// 0.4 would print as 0.4000000059604645).
    fn effective_text(&self, config: &Config) -> Result<String, String> {
        let table = std::collections::BTreeMap::from([(T::KEY, self.effective(config))]);
        toml::to_string(&table).map_err(|e| e.to_string())
    }

    fn validate(&self, config: &Config) -> Result<(), ConfigError> {
        Section::validate(self, config)
    }

    fn secret_files(&self) -> Vec<(String, PathBuf)> {
        Section::secret_files(self)
    }

    fn forget_secret(&mut self, key: &str) {
        Section::forget_secret(self, key);
    }

    fn reloaded(&self, reloaded: &dyn Held) -> Box<dyn Held> {
        match reloaded.as_any().downcast_ref::<T>() {
            Some(reloaded) => Box::new(Section::reloaded(self, reloaded)),
            None => self.clone_box(),
        }
    }

    fn reloadable(&self) -> &'static [&'static str] {
        T::RELOADABLE
    }
}

/// The sections a config holds, in the order of its [`Schema`](super::section::Schema).
#[derive(Default)]
pub struct Sections(pub(super) Vec<Box<dyn Held>>);

impl Clone for Sections {
    fn clone(&self) -> Self {
        Sections(self.0.iter().map(|section| section.clone_box()).collect())
    }
}

impl fmt::Debug for Sections {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.iter()).finish()
    }
}

impl Sections {
    /// The section of type `T`, if the config has it.
    pub fn get<T: Section>(&self) -> Option<&T> {
        self.0.iter().find_map(|section| section.as_any().downcast_ref::<T>())
    }

    /// The section of type `T` to change (tests; a running config changes by reload only).
    pub fn get_mut<T: Section>(&mut self) -> Option<&mut T> {
        self.0.iter_mut().find_map(|section| section.as_any_mut().downcast_mut::<T>())
    }

    /// Each section's key and TOML, as read.
    pub(super) fn values(&self) -> Result<Vec<(&'static str, Value)>, String> {
        self.0.iter().map(|section| Ok((section.key(), section.to_value()?))).collect()
    }

    /// Every section as `check-config --print` shows it: its table as TOML text, computed defaults
    /// filled in from `config`.
    pub(super) fn effective_text(&self, config: &Config) -> Result<String, String> {
        let texts: Result<Vec<String>, String> = self.0.iter().map(|section| section.effective_text(config)).collect();
        Ok(texts?.join("\n"))
    }

    /// Every section's checks, in order; the first error.
    pub(super) fn validate(&self, config: &Config) -> Result<(), ConfigError> {
        self.0.iter().try_for_each(|section| section.validate(config))
    }

    pub(super) fn secret_files(&self) -> Vec<(String, PathBuf)> {
        self.0.iter().flat_map(|section| section.secret_files()).collect()
    }

    pub(super) fn forget_secret(&mut self, key: &str) {
        for section in &mut self.0 {
            section.forget_secret(key);
        }
    }

    /// The reloadable keys of every section.
    pub(super) fn reloadable(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.0.iter().flat_map(|section| section.reloadable().iter().copied())
    }

    /// These sections with what a reload applies taken from `reloaded`'s of the same key.
    pub(super) fn reloaded(&self, reloaded: &Sections) -> Sections {
        let applied = self.0.iter().map(|section| match reloaded.0.iter().find(|other| other.key() == section.key()) {
            Some(other) => section.reloaded(other.as_ref()),
            None => section.clone_box(),
        });
        Sections(applied.collect())
    }
}
