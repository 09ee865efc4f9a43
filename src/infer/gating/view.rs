//! [`MotionView`]: one frame's motion as a camera's gate shows it to a watcher (the page's debug
//! view), in a type of its own shared by the gate's link and the HTTP route that writes it out.
//!
//! Owns: the view's fields and their meaning. Must not: be computed for a frame nobody watches
//! (`super::link` copies it out only then) or know how it is sent.

use std::time::SystemTime;

use crate::motion::{MotionState, Region};

/// One judged frame's motion.
#[derive(Debug, Clone, PartialEq)]
pub struct MotionView {
    /// Counts the frames shown since the gate started (a watcher sees a new frame by it).
    pub frame: u64,
    pub captured_at: SystemTime,
    /// The frame's size in pixels: the regions are in these.
    pub width: u32,
    pub height: u32,
    pub state: MotionState,
    /// Share of the unmasked cells that changed.
    pub changed: f32,
    /// The frame was kept from inference.
    pub gated: bool,
    /// The regions that are motion, largest first (at most `crate::motion::MAX_REGIONS`).
    pub regions: Vec<Region>,
}

impl Default for MotionView {
    fn default() -> MotionView {
        MotionView {
            frame: 0,
            captured_at: SystemTime::UNIX_EPOCH,
            width: 0,
            height: 0,
            state: MotionState::Learning,
            changed: 0.0,
            gated: false,
            regions: Vec::new(),
        }
    }
}
