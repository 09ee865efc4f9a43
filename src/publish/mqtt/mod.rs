//! MQTT: the outlet that turns the pipeline's values into topics and payloads, and the publisher
//! that gets them to the broker. Two layers, each its own files:
//!
//! - **What it is** — [`config`] (its sections, `[mqtt]` and `[homeassistant]`: types),
//!   [`sections`] (how they are read: defaults, checks, secrets) and [`kind`] (how it registers itself: its checks before the start, its start).
//! - **What to publish** — [`outlet`] (the MQTT outlet: every topic and payload, the commands that
//!   arrive), [`topics`] (the topic layout), [`policy`] (how often detections go out), [`counts`]
//!   (per-camera label counts) and [`homeassistant`] (discovery). They decide what goes out and
//!   build it, and reach the broker only through the [`Publisher`] handle.
//! - **Getting it there** — [`publisher`] (the cheap handle callers clone; the status topic and
//!   its Last Will), `settings` (resolves `[mqtt]`, reads the password and TLS files),
//!   `message` (one queued message and the limits it must meet), `outbox` (every message until
//!   the broker acknowledged it, and why the daemon keeps its own), `retained` (the latest state
//!   messages that every connection re-sends), [`login`] (the client options every connection
//!   presents, a refused login told in the config's words, `probe`'s one-off login), `connection`
//!   (the task that owns rumqttc's event loop: reconnection with backoff, the subscriptions, a
//!   bounded flush at shutdown) and `inbound` (what arrives on the subscriptions: the size bound,
//!   the queue to the outlet). These must not build payloads or decide what or how often to
//!   publish, and must never block or fail the caller because of the broker.
//!
//! A handle apart from the task that owns the connection, as rumqttc's client and event loop.

pub mod config;
mod connection;
pub mod counts;
pub mod homeassistant;
mod inbound;
pub mod kind;
pub mod login;
mod message;
mod outbox;
pub mod outlet;
pub mod policy;
pub mod publisher;
mod retained;
pub mod sections;
mod settings;
pub mod topics;

pub use inbound::{Inbound, Incoming, MAX_INCOMING_PAYLOAD_BYTES};
pub use kind::OUTLET;
pub use message::{Outgoing, MAX_PAYLOAD_BYTES};
pub use outbox::{MqttStats, MAX_IN_FLIGHT, STATUS_BUILDING, STATUS_OFFLINE, STATUS_ONLINE};
pub use outlet::MqttOutlet;
pub use publisher::Publisher;
pub use retained::StateClass;
pub use settings::{MqttError, MqttSettings, TlsMaterial};
