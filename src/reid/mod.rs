//! Re-identification: the same object again, on another camera or after an occlusion, recognised
//! by its appearance (embeddings of its crops), never by its position.
//!
//! Owns: pure CPU work on embeddings handed in — an [`Embedding`] (a unit vector), a track's
//! [`Appearance`] (a few prototypes: L2-normalised averages of its embeddings), and the
//! [`Gallery`] of recent tracks' appearances across all cameras that links a new track to an
//! earlier one of the same label (`same_as`) and gives linked tracks one object id. Must not: run
//! models, choose crops, read clocks (times come in with the sightings, in seconds), read the
//! config, or build payloads. Unlike `crate::track`, it spans cameras: that is its point.
//!
//! - [`embedding`]: normalising a model's output, cosine similarity;
//! - [`appearance`]: folding a track's embeddings into prototypes, and comparing two tracks;
//! - [`gallery`]: the bounded gallery, its link rules and object ids.

pub mod appearance;
pub mod embedding;
pub mod gallery;

pub use appearance::Appearance;
pub use embedding::Embedding;
pub use gallery::{Gallery, GalleryParams, Identity, Link, TrackKey};
