//! The publisher: the cheap handle every part of the MQTT outlet publishes through, apart from the
//! task that owns the connection (as rumqttc's client and event loop).
//!
//! Owns: [`Publisher`] (queueing into the outbox, the retained states and the status topic, the
//! bounded shutdown); the connection task it starts hands what arrives on the subscriptions to an
//! [`Inbound`] queue. Must not: build payloads, decide what or how often to publish, or block or
//! fail the caller because of the broker.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rumqttc::QoS;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::connection;
use super::inbound::Inbound;
use super::message::{self, Message};
use super::outbox::{MqttStats, Outbox, Shared, STATUS_OFFLINE, STATUS_ONLINE};
use super::retained::StateClass;
use super::settings::{MqttError, MqttSettings};
use crate::sys::lock::lock;

/// Handle to the publisher; clones share one connection. Dropping the last clone without
/// [`Publisher::shutdown`] aborts the connection, so the broker publishes the Last Will.
#[derive(Clone)]
pub struct Publisher {
    shared: Arc<Shared>,
    prefix: Arc<str>,
    qos: QoS,
    task: Arc<ConnectionTask>,
}

impl fmt::Debug for Publisher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Publisher").field("prefix", &self.prefix).field("stats", &self.stats()).finish()
    }
}

/// Owns the spawned connection task and aborts it when the last [`Publisher`] goes away.
struct ConnectionTask(Mutex<Option<JoinHandle<()>>>);

impl Drop for ConnectionTask {
    fn drop(&mut self) {
        if let Some(handle) = lock(&self.0).take() {
            handle.abort();
        }
    }
}

impl Publisher {
    /// Must be called inside a tokio runtime; spawns the connection task, which connects in the background.
    pub fn start(settings: MqttSettings) -> Result<Publisher, MqttError> {
        Self::start_with_status(settings, STATUS_ONLINE, None)
    }

    /// [`start`](Self::start) with another retained status while connected
    /// ([`STATUS_BUILDING`](super::outbox::STATUS_BUILDING) before the engine is ready), until
    /// [`set_status`](Self::set_status) says otherwise, and with subscriptions whose messages go to
    /// `inbound`.
    pub fn start_with_status(
        settings: MqttSettings,
        status: &'static str,
        inbound: Option<Inbound>,
    ) -> Result<Publisher, MqttError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| MqttError::NoRuntime)?;
        let shared = Arc::new(Shared {
            outbox: Mutex::new(Outbox::new(settings.queue_capacity, settings.queue_max_bytes, settings.status_topic())),
            wake: Notify::new(),
            stopping: AtomicBool::new(false),
        });
        lock(&shared.outbox).status = status;
        let prefix: Arc<str> = settings.prefix.clone().into();
        let qos = settings.qos;
        let handle = connection::spawn(&runtime, settings, Arc::clone(&shared), inbound);
        Ok(Publisher { shared, prefix, qos, task: Arc::new(ConnectionTask(Mutex::new(Some(handle)))) })
    }

    /// Publishes `status` (retained, QoS 1) on the status topic now and after every reconnect:
    /// [`STATUS_ONLINE`] once the engine is ready. The Last Will stays `offline`.
    pub fn set_status(&self, status: &'static str) {
        let mut outbox = lock(&self.shared.outbox);
        if outbox.closing {
            return;
        }
        outbox.status = status;
        let message = outbox.status_message(status);
        outbox.set_status(message);
        drop(outbox);
        self.shared.wake.notify_one();
    }

    /// `<prefix>/<suffix>`.
    pub fn topic(&self, suffix: &str) -> String {
        format!("{}/{suffix}", self.prefix)
    }

    /// Queues a message with the configured QoS. Never blocks and never fails: when the queue is
    /// full (messages or bytes) the oldest per-frame message is dropped and counted, else the
    /// oldest data message. For what subscribers act on: events, zone counts, telemetry.
    pub fn publish(&self, topic: String, payload: Vec<u8>, retain: bool) {
        self.enqueue(topic, payload, retain, false);
    }

    /// [`publish`](Self::publish) for a per-frame message (detections, snapshots): the first to go
    /// when the queue is full; when only other messages are queued, this one is dropped instead.
    pub fn publish_per_frame(&self, topic: String, payload: Vec<u8>, retain: bool) {
        self.enqueue(topic, payload, retain, true);
    }

    /// Whether a message for `topic` of `len` bytes may be queued; a refused one (an invalid
    /// topic, too large) is logged and counted as dropped.
    fn admits(&self, what: &str, topic: &str, len: usize) -> bool {
        let Some(reason) = message::refusal(topic, len) else { return true };
        log::warn!("MQTT: dropping a {len} byte {what} for {topic:?}: {reason}");
        lock(&self.shared.outbox).dropped += 1;
        false
    }

    fn enqueue(&self, topic: String, payload: Vec<u8>, retain: bool, per_frame: bool) {
        if !self.admits("message", &topic, payload.len()) {
            return;
        }
        let message = Message { topic, payload, qos: self.qos, retain, is_status: false, is_state: false, per_frame };
        lock(&self.shared.outbox).push(message);
        self.shared.wake.notify_one();
    }

    /// Publishes a retained state (a discovery config, a count, a switch state, telemetry) and
    /// keeps it: after every reconnect, and on [`Publisher::resync`], the latest state of every
    /// topic is sent again before the status, so a broker that lost its retained messages, and
    /// whoever subscribes to it, gets them back. An empty payload deletes the retained message and
    /// forgets the topic (the deletion is sent until the broker acknowledged it). Never blocks; the
    /// configuration bounds how many states there are, so they are not counted against the queue
    /// bounds.
    pub fn publish_state(&self, class: StateClass, topic: String, payload: Vec<u8>) {
        if !self.admits("state message", &topic, payload.len()) {
            return;
        }
        let message =
            Message { topic, payload, qos: self.qos, retain: true, is_status: false, is_state: true, per_frame: false };
        lock(&self.shared.outbox).push_state(class, message);
        self.shared.wake.notify_one();
    }

    /// Sends every retained state, then the status, again (Home Assistant announced itself and
    /// may have lost its entities). The connection does this by itself after every CONNACK.
    pub fn resync(&self) {
        lock(&self.shared.outbox).resync();
        self.shared.wake.notify_one();
    }

    pub fn stats(&self) -> MqttStats {
        lock(&self.shared.outbox).stats()
    }

    /// The daemon has begun to stop: the messages of its last moments are still queued and sent,
    /// and a connection attempt that fails from now on is logged at debug, not as a retry (the
    /// stop says what was not delivered). [`Publisher::shutdown`] follows.
    pub fn stopping(&self) {
        self.shared.stopping.store(true, Ordering::Relaxed);
    }

    /// Publishes the retained `offline` status, waits at most `shutdown_flush` for every queued
    /// QoS ≥ 1 message to be acknowledged, and disconnects cleanly. When the flush time runs out,
    /// the connection is dropped instead, so that the broker publishes the Last Will (`offline`).
    /// Later publishes are dropped. Returns at once on the second call.
    pub async fn shutdown(&self) {
        {
            let mut outbox = lock(&self.shared.outbox);
            if !outbox.closing {
                outbox.closing = true;
                let offline = outbox.status_message(STATUS_OFFLINE);
                outbox.set_status(offline);
            }
        }
        self.shared.wake.notify_one();
        let handle = lock(&self.task.0).take();
        if let Some(handle) = handle {
            if let Err(error) = handle.await {
                log::error!("MQTT connection task failed: {error}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_outside_a_runtime_is_an_error() {
        let config = super::super::kind::schema().embedded_default().expect("the embedded default is valid");
        let settings = MqttSettings::from_config(&config).expect("settings");
        assert!(matches!(Publisher::start(settings), Err(MqttError::NoRuntime)));
    }
}
