//! ⑦ Results out: the per-frame sink runs each camera's tracker ([`camera_events`], with
//! re-identification across cameras: [`camera_reid`]) and hands typed
//! values — detections, track events, zone counts, snapshots, the daemon's status and telemetry —
//! to the outlets ([`outlet`], each registered as a kind: [`kind`]): MQTT with Home Assistant
//! discovery ([`mqtt`], the only place that knows topics), webhooks ([`webhook`]: signed POSTs of
//! tracking events), the recorder (`crate::record`) and the live view ([`live`], what the HTTP
//! stage reads, with its events pushed as they happen: [`event_feed`]). The schemas of the JSON
//! messages ([`payload`], [`event_message`]) and snapshot rendering ([`snapshot`]) are shared by
//! the outlets and the HTTP API.
//!
//! Owns: everything from a processed frame to what leaves the daemon. Must not: run inference (a
//! camera's tracks go to its per-track step, `crate::infer::per_track`, which runs the per-track
//! models on the worker's sessions and keeps their answers), touch frame rings, or block an
//! inference worker (outlets hand over to their own tasks through bounded queues).

pub mod camera_events;
pub mod camera_reid;
pub mod clips;
pub mod dispatch;
pub mod event_feed;
pub mod event_message;
pub mod event_pictures;
pub mod figures;
pub mod kind;
pub mod live;
pub mod live_event;
pub mod mqtt;
pub mod object_event;
pub mod outlet;
pub mod payload;
pub mod reporting;
pub mod sink;
pub mod snapshot;
pub mod webhook;
