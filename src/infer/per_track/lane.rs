//! A per-track model the workers run: its `[models.<name>]` name, its backend and its kind.
//!
//! Owns: [`PerTrackLane`]. Must not: hold sessions (each worker opens its own:
//! `super::sessions`).

use std::sync::Arc;

use super::kind::PerTrackKind;
use crate::backend::Backend;

/// A per-track model: its name, the backend it is loaded on, and its kind (how its outputs read).
pub struct PerTrackLane {
    pub name: String,
    pub backend: Arc<dyn Backend>,
    pub kind: Arc<dyn PerTrackKind>,
}
