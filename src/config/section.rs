//! Sections of the config that components own: an outlet's table (`[mqtt]`, `[[webhook]]`) has
//! its types, defaults, documentation, checks and secrets beside the outlet, and `config/` only
//! composes it (as Vector keeps each sink's config in the sink's folder).
//!
//! Owns: [`SectionKind`] (how one [`Section`] is read), reading the registered ones into
//! [`Sections`] (the trait and the sections a config holds are `whole`'s, beside the `Config`
//! they refer to) and [`Schema`] (the core, the sections and the kinds of per-track model a
//! config is read with: the daemon's is `crate::cmd::outlets`'s). Must not: know any section or
//! kind: a component registers its own, and nothing here names one.
//!
//! A section is read from the merged TOML (the user's table merged over the section's
//! [`Section::DEFAULTS`], as every core table is) with the section's own serde rules
//! (`deny_unknown_fields` included), and every error names its key from the top
//! (`mqtt.qos`, `webhook[1].url`). Checks run after the core's, with the whole config at hand
//! (Home Assistant's ids depend on the cameras' zones).

use std::fmt;

use toml::{Table, Value};

use super::error::ConfigError;
use super::merge::Resolve;
use super::models::PerTrackRole;
use super::origin::ConfigOrigin;
use super::whole::{Held, Section, Sections};

/// `T` as its [`Section::DEFAULTS`] set it, unresolved; `None` when the text sets none of it
/// (a section a user must write, as `[[webhook]]`) or does not read as one.
pub fn built_in<T: Section>() -> Option<T> {
    let mut table: Table = toml::from_str(T::DEFAULTS).ok()?;
    table.remove(T::KEY)?.try_into().ok()
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

/// What a config is read with: the core (the tables `config/` types itself) and the sections
/// components own. [`Schema::CORE`] has none: `Config::load` and its siblings read with it, which
/// is what every stage below the outlets needs; the daemon reads with its full schema
/// (`crate::cmd::outlets::schema`), where a table no component registered is unknown.
#[derive(Debug, Clone, Default)]
pub struct Schema {
    sections: Vec<SectionKind>,
    per_track: Vec<PerTrackRole>,
}

impl Schema {
    /// No component sections, no per-track kinds: a `[models.<name>]` of any `kind` is read
    /// with the checks every per-track model shares (what the stages' own tests need).
    pub const CORE: Schema = Schema { sections: Vec::new(), per_track: Vec::new() };

    /// The core and `sections`, in this order (the built-in default's text follows it).
    pub fn new(sections: impl IntoIterator<Item = SectionKind>) -> Schema {
        Schema { sections: sections.into_iter().collect(), per_track: Vec::new() }
    }

    /// This schema with the kinds of per-track model `roles` (`crate::infer::per_track::KINDS`):
    /// a `kind` none of them names is refused, and each kind's table is checked as its role says.
    pub fn with_per_track(mut self, roles: impl IntoIterator<Item = PerTrackRole>) -> Schema {
        self.per_track = roles.into_iter().collect();
        self
    }

    /// The kinds of per-track model it reads.
    pub(super) fn per_track(&self) -> &[PerTrackRole] {
        &self.per_track
    }

    /// The built-in default with its comments: the core's text, then each section's. This is
    /// `config/jetson-detectd.toml` (`check-config --print-default`, which `docs/gen.py` checks).
    pub fn default_text(&self) -> String {
        let mut text = super::whole::core_defaults_text();
        for kind in &self.sections {
            text.push('\n');
            text.push_str(kind.defaults);
        }
        text
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
