//! Sections of the config that components own: an outlet's table (`[mqtt]`, `[[webhook]]`) has
//! its types, defaults, documentation, checks and secrets beside the outlet, and `config/` only
//! composes it (as Vector keeps each sink's config in the sink's folder).
//!
//! Owns: the [`Section`] trait a component implements for its table, [`SectionKind`] (how one is
//! read), [`Sections`] (the sections a config holds, kept typed and found by type) and [`Schema`]
//! (the core and the sections a config is read with: the daemon's is `crate::cmd::outlets`'s).
//! Must not: know any section: a component registers its own, and nothing here names one.
//!
//! A section is read from the merged TOML (the user's table merged over the section's
//! [`Section::DEFAULTS`], as every core table is) with the section's own serde rules
//! (`deny_unknown_fields` included), and every error names its key from the top
//! (`mqtt.qos`, `webhook[1].url`). Checks run after the core's, with the whole config at hand
//! (Home Assistant's ids depend on the cameras' zones).

use std::any::Any;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Serialize;
use toml::{Table, Value};

use super::error::ConfigError;
use super::load::Config;
use super::origin::ConfigOrigin;

/// Resolves a relative path against the directory of the file that set the key at `key`
/// (`["mqtt", "password_file"]`); an absolute path stays as it is.
pub type Resolve<'a> = dyn FnMut(&mut PathBuf, &[&str]) + 'a;

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

/// `T` as its [`Section::DEFAULTS`] set it, unresolved; `None` when the text sets none of it
/// (a section a user must write, as `[[webhook]]`) or does not read as one.
pub fn built_in<T: Section>() -> Option<T> {
    let mut table: Table = toml::from_str(T::DEFAULTS).ok()?;
    table.remove(T::KEY)?.try_into().ok()
}

/// A section as [`Sections`] keeps it: [`Section`] without its type.
trait Held: fmt::Debug + Send + Sync {
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

/// What is wrong in a section as read: the key from the top, and the message.
pub(super) type KeyError = (String, String);

/// What reading one section found: the section, when it typed at all (the default's values
/// standing in for those that did not fit), each value that did not fit, and the keys set aside
/// for them (both from the top: `mqtt.port`).
type Read = (Option<Box<dyn Held>>, Vec<KeyError>, Vec<String>);

/// Reads one section from its TOML over its defaults' (what stands in for a value that does not
/// fit), resolving its paths.
type Reader = fn(Value, &Value, &mut Resolve<'_>) -> Read;

/// How one [`Section`] is read: registered by its component ([`SectionKind::of`]).
#[derive(Clone, Copy)]
pub struct SectionKind {
    key: &'static str,
    defaults: &'static str,
    read: Reader,
}

impl fmt::Debug for SectionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("SectionKind").field(&self.key).finish()
    }
}

impl SectionKind {
    /// The kind of the component's section `T`.
    pub const fn of<T: Section>() -> SectionKind {
        SectionKind { key: T::KEY, defaults: T::DEFAULTS, read: read::<T> }
    }

    pub fn key(&self) -> &'static str {
        self.key
    }
}

/// `value` as a `T`, its paths resolved, with every value that did not fit set aside in turn
/// (`super::collect`), so that all of them are reported at once.
fn read<T: Section>(mut value: Value, fallback: &Value, resolve: &mut Resolve<'_>) -> Read {
    let from_top = |path: &str| match path {
        "" => T::KEY.to_owned(),
        _ if path.starts_with('[') => format!("{}{path}", T::KEY),
        _ => format!("{}.{path}", T::KEY),
    };
    let mut set_aside = Vec::new();
    let (typed, misfits) = super::collect::deserialize_all::<T>(&mut value, fallback, &mut set_aside);
    let misfits = misfits.into_iter().map(|misfit| (from_top(&misfit.key), misfit.message)).collect();
    let section = typed.map(|mut section| {
        section.resolve_paths(resolve);
        Box::new(section) as Box<dyn Held>
    });
    (section, misfits, set_aside.iter().map(|path| from_top(path)).collect())
}

/// The sections a config holds, in the order of its [`Schema`].
#[derive(Default)]
pub struct Sections(Vec<Box<dyn Held>>);

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

/// What a config is read with: the core (the tables `config/` types itself) and the sections
/// components own. [`Schema::CORE`] has none: `Config::load` and its siblings read with it, which
/// is what every stage below the outlets needs; the daemon reads with its full schema
/// (`crate::cmd::outlets::schema`), where a table no component registered is unknown.
#[derive(Debug, Clone, Default)]
pub struct Schema {
    sections: Vec<SectionKind>,
}

impl Schema {
    /// No component sections.
    pub const CORE: Schema = Schema { sections: Vec::new() };

    /// The core and `sections`, in this order (the built-in default's text follows it).
    pub fn new(sections: impl IntoIterator<Item = SectionKind>) -> Schema {
        Schema { sections: sections.into_iter().collect() }
    }

    /// The built-in default with its comments: the core's text, then each section's. This is
    /// `config/jetson-detectd.toml` (`check-config --print-default`, which `docs/gen.py` checks).
    pub fn default_text(&self) -> String {
        let mut text = super::load::CORE_DEFAULTS.to_owned();
        for kind in &self.sections {
            text.push('\n');
            text.push_str(kind.defaults);
        }
        text
    }

    /// Reads `path` ([`Config::load`]) with this schema.
    pub fn load(&self, path: &Path) -> Result<Config, ConfigError> {
        Config::load_with(path, self)
    }

    /// The built-in default alone ([`Config::embedded_default`]) with this schema.
    pub fn embedded_default(&self) -> Result<Config, ConfigError> {
        Config::from_toml_with("", ConfigOrigin::Embedded, &super::merge::data_dir(), self)
    }

    /// `text` merged over the built-in default ([`Config::from_toml`]) with this schema.
    pub fn from_toml(&self, text: &str, origin: ConfigOrigin, base: &Path) -> Result<Config, ConfigError> {
        Config::from_toml_with(text, origin, base, self)
    }

    /// Each section's defaults, merged into `defaults` (the core's).
    pub(super) fn merge_defaults(&self, defaults: &mut Table) -> Result<(), ConfigError> {
        for kind in &self.sections {
            let table: Table = toml::from_str(kind.defaults).map_err(|e| ConfigError::Parse {
                origin: ConfigOrigin::Embedded,
                message: format!("[{}]: {e}", kind.key),
            })?;
            super::merge::merge(defaults, &table);
        }
        Ok(())
    }

    /// Takes each registered section's table out of `merged` (what is left is the core's, where a
    /// key no component registered is unknown), to be read once the core is.
    pub(super) fn take_sections(&self, merged: &mut Table) -> Vec<(SectionKind, Value)> {
        self.sections.iter().filter_map(|kind| Some((*kind, merged.remove(kind.key)?))).collect()
    }

    /// The keys of the registered sections, for the message about an unknown table.
    pub(super) fn keys(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.sections.iter().map(|kind| kind.key)
    }
}

/// Reads the sections [`Schema::take_sections`] took, in order, each over its defaults' table
/// (`defaults`, taken the same way from the defaults): those that typed, every value that did not
/// fit (its key from the top, and serde's message), and the keys set aside for them.
pub(super) fn read_sections(
    taken: Vec<(SectionKind, Value)>,
    defaults: &[(SectionKind, Value)],
    resolve: &mut Resolve<'_>,
) -> (Sections, Vec<KeyError>, Vec<String>) {
    let (mut sections, mut misfits, mut set_aside) = (Vec::new(), Vec::new(), Vec::new());
    let none = Value::Table(Table::new());
    for (kind, value) in taken {
        let fallback = defaults.iter().find(|(other, _)| other.key == kind.key).map_or(&none, |(_, value)| value);
        let (section, mut misfit, mut aside) = (kind.read)(value, fallback, resolve);
        sections.extend(section);
        misfits.append(&mut misfit);
        set_aside.append(&mut aside);
    }
    (Sections(sections), misfits, set_aside)
}
