//! What a track's per-track models said of it, as the pipeline hands it to the outlets: one
//! attribute per model, a label with a score or a vector, whichever kind of model produced it.
//!
//! Owns: [`Attribute`], [`Attributes`] and [`TrackAttributes`]. Must not: know which kind of model
//! produced an attribute, or how a message spells it (the outlets do).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::track::tracker::TrackId;

/// One model's answer on a track, as messages carry it.
#[derive(Debug, Clone, PartialEq)]
pub enum Attribute {
    /// A label from the model's label file, with its score in 0..1.
    Label { label: String, score: f32 },
    /// A vector (an embedding).
    Vector(Arc<[f32]>),
}

impl Attribute {
    /// A short text for pictures (`red`); `None` for a vector.
    pub fn caption(&self) -> Option<&str> {
        match self {
            Attribute::Label { label, .. } => Some(label),
            Attribute::Vector(_) => None,
        }
    }
}

/// A track's attributes, by `[models.<name>]` name.
pub type Attributes = BTreeMap<String, Attribute>;

/// The attributes of a camera's live tracks, by track id.
pub type TrackAttributes = HashMap<TrackId, Attributes>;
