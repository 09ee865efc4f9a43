//! Naming an event's clip: a stage of the sink, before any outlet receives the event.
//!
//! Owns: [`ClipNaming`], what the sink asks of each event before it hands the event over, so that
//! the event carries its clip ([`ObjectEvent::clip`]) and every outlet sees the same value. The
//! recorder (`crate::record`) answers it. Must not: wait or do I/O: it is asked on the inference
//! worker, for every event.

use super::object_event::{ClipRef, ObjectEvent};

/// Names the clip an event of a camera belongs to.
pub trait ClipNaming: Send + Sync {
    /// The clip `event` of `camera` belongs to, if it has one: answered at once, from the event
    /// alone (no I/O, no waiting).
    fn clip_of(&self, camera: &str, event: &ObjectEvent) -> Option<ClipRef>;
}
