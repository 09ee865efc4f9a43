//! Objects over time: per-camera multi-object tracking, zones, counting lines and the events
//! built on them.
//!
//! Owns everything between a frame's detections and the tracking events (`start`/`update`/`end`,
//! zone occupancy): pure CPU work on each camera's own state, driven by the frames' capture
//! times. Must not: read the config, build payloads, render snapshots, publish, read clocks, or
//! share state between cameras (`crate::publish::camera_events` runs it per camera and hands its
//! events to the outlets as typed values; `crate::config::scene` builds its scenes).
//!
//! The flow of one frame, module by module:
//! - [`tracker`] matches detections to tracks ([`association`], with each track's motion in a
//!   [`kalman`] filter) and reports each track's lifecycle;
//! - [`events`] applies the event rules — [`zones`] and [`lines`] (on [`geometry`]), stationarity,
//!   better scores — and says which `start`/`update`/`end` events happened;
//! - [`occupancy`] counts the confirmed objects per zone and label;
//! - [`scene_tracker`] runs these three in step for one camera, and says per detection its
//!   track's id and the zones the track is in ([`detection_zones`]);
//! - [`crop_plan`] says which tracks a per-track model (a classifier) looks at on a frame.

pub mod association;
pub mod crop_plan;
pub mod detection_zones;
pub mod events;
pub mod geometry;
pub mod kalman;
pub mod lines;
pub mod occupancy;
pub mod scene_tracker;
pub mod tracker;
pub mod zones;
