//! ⑦ Results out: the per-frame message payloads, the publish policy, snapshots, the MQTT
//! connection and Home Assistant discovery.
//!
//! Owns: everything that turns detections and tracking events into bytes on a topic. Must not:
//! run inference, touch frame rings, or block an inference worker (publishing is a hand-over to
//! the MQTT connection task's bounded outbox).

pub mod events;
pub mod live;
pub mod mqtt;
pub mod payload;
pub mod sink;
pub mod snapshot;
pub mod tracking;
