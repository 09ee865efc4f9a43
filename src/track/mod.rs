//! Objects over time: per-camera multi-object tracking, zones, counting lines and the event
//! messages built on them.
//!
//! Owns everything between a frame's detections and the tracking messages (events, zone
//! occupancy, event snapshots): pure CPU work on each camera's own state, driven by the frames'
//! capture times. Must not: publish, read clocks, or share state between cameras.
//!
//! The flow of one frame, module by module:
//! - [`tracker`] matches detections to tracks ([`association`], with each track's motion in a
//!   [`kalman`] filter) and reports each track's lifecycle;
//! - [`events`] applies the event rules — [`zones`] and [`lines`] (on [`geometry`]), stationarity,
//!   better scores — and says which `start`/`update`/`end` events happened;
//! - [`occupancy`] counts the confirmed objects per zone and label;
//! - [`scene_tracker`] runs these three in step for one camera; [`camera`] turns the result into
//!   messages ([`message`] is the event schema) and keeps each track's best picture.

pub mod association;
pub mod camera;
pub mod events;
pub mod geometry;
pub mod kalman;
pub mod lines;
pub mod message;
pub mod occupancy;
pub mod scene_tracker;
pub mod tracker;
pub mod zones;
