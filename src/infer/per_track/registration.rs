//! What a kind of per-track model registers ([`RegisteredKind`]: its config identity, the
//! kind-specific part of its crop rule, how it is built) and what it is built from ([`Loaded`]).
//! Each kind's file declares its own `REGISTERED`; `super::registry::KINDS` lists them.
//!
//! Owns: [`RegisteredKind`], [`Loaded`], [`BuildError`]. Must not: list the kinds or know any.

use std::sync::Arc;

use super::kind::PerTrackKind;
use crate::config::models::{NamedModel, PerTrackRole};
use crate::config::{Config, ConfigError};
use crate::decode::DecodeError;
use crate::model::ModelSpec;

/// A kind of per-track model, as it registers.
#[derive(Debug, Clone, Copy)]
pub struct RegisteredKind {
    /// What its `[models.<name>]` table is (`kind = "<role.name>"`).
    pub role: PerTrackRole,
    /// It looks at a track again when the track's box's area has grown this many times since its
    /// last crop (`None`: only as `every` says).
    pub regrown: Option<f32>,
    /// Builds the kind of a loaded model.
    pub build: fn(&Loaded<'_>) -> Result<Arc<dyn PerTrackKind>, BuildError>,
}

/// A `[models.<name>]` per-track model as loaded, what a kind is built from.
#[derive(Clone, Copy)]
pub struct Loaded<'a> {
    pub config: &'a Config,
    pub name: &'a str,
    pub named: &'a NamedModel,
    pub model: &'a ModelSpec,
}

/// Why a kind could not be built from its model: its files or tables (a configuration error).
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("models.{name}.groups: {error}")]
    Groups { name: String, error: DecodeError },
}
