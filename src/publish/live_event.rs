//! An event as the live view keeps it and its feed pushes it: shared by both.
//!
//! Owns: [`LiveEvent`]. Must not: carry the event's picture (the ring keeps no JPEGs).

use std::sync::Arc;

use super::object_event::ObjectEvent;

/// One event, with the camera it came from.
#[derive(Debug, Clone)]
pub struct LiveEvent {
    pub camera: String,
    /// The event without its picture.
    pub event: Arc<ObjectEvent>,
}
