//! The MQTT publisher: one rumqttc client, a bounded outbox, the status topic and its Last Will,
//! reconnection with backoff, and a bounded flush at shutdown.
//!
//! Owns: the broker connection and every message on its way to the broker. Must not: build
//! payloads, decide what or how often to publish (the pipeline and telemetry do that), or ever block
//! or fail the caller because of the broker.
//!
//! Why an outbox of our own: rumqttc 0.25 keeps unacknowledged QoS 1/2 publishes in its
//! `MqttState`; on a connection error `EventLoop::clean` moves them, and every request still
//! waiting in its request channel, to `EventLoop::pending`, and the next CONNACK *clears* `pending`
//! unless the broker reports `session_present`. A broker that restarts without persistence, or
//! forgets the session for any other reason, would silently lose every queued or in-flight
//! message. So each message stays in [`Outbox`] until the broker has acknowledged it (PUBACK for
//! QoS 1, PUBCOMP for QoS 2); the client connects with a clean session, so rumqttc never replays
//! anything by itself, and after every CONNACK the connection task re-sends what is unacknowledged.
//! Duplicates after a reconnect are possible (QoS 1 semantics); loss of an accepted message is not.
//!
//! Only the connection task hands messages to rumqttc, never more than [`MAX_IN_FLIGHT`] at a time,
//! and only while connected. rumqttc reports every publish it writes as `Outgoing::Publish(pkid)`
//! in hand-over order, which is how a packet id — and so its acknowledgement — is tied to a message.

use std::collections::VecDeque;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rumqttc::{AsyncClient, Event, EventLoop, LastWill, MqttOptions, Outgoing, Packet, QoS, Transport};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::config::Config;
use crate::sys::files::{self, ReadError, MAX_PASSWORD_BYTES, MAX_PEM_BYTES};
use crate::sys::lock::lock;

/// Payload of the retained status topic while connected.
pub const STATUS_ONLINE: &str = "online";
/// Payload of the retained status topic while the engine is being built at start (minutes on a
/// Jetson): connected, not detecting yet.
pub const STATUS_BUILDING: &str = "building";
/// Payload of the status topic after a clean shutdown, and of the Last Will.
pub const STATUS_OFFLINE: &str = "offline";
/// Largest payload accepted; bigger ones are dropped (and counted) instead of breaking the connection.
pub const MAX_PAYLOAD_BYTES: usize = 8 * 1024 * 1024;
/// Messages handed to rumqttc and not yet acknowledged; also rumqttc's in-flight window.
pub const MAX_IN_FLIGHT: u16 = 64;
const MAX_TOPIC_BYTES: usize = 1024;

#[derive(Debug, thiserror::Error)]
pub enum MqttError {
    #[error("mqtt.password_file {path}: {source}")]
    PasswordFile { path: PathBuf, source: ReadError },
    #[error("mqtt.password_file {path}: the first line is empty")]
    EmptyPassword { path: PathBuf },
    #[error("mqtt.password_env: environment variable {name} is not set or not valid UTF-8")]
    PasswordEnv { name: String },
    #[error("mqtt.tls.{key} {path}: {source}")]
    TlsFile { key: &'static str, path: PathBuf, source: ReadError },
    #[error("mqtt.tls.{key} {path}: no PEM `{expected}` block in the file")]
    TlsPem { key: &'static str, path: PathBuf, expected: &'static str },
    #[error("mqtt.tls.{key} {path}: {reason}")]
    TlsContent { key: &'static str, path: PathBuf, reason: String },
    #[error("the MQTT publisher must be started inside a tokio runtime")]
    NoRuntime,
}

impl MqttError {
    /// A mistake in the config or in a file it names, which a restart cannot fix.
    pub fn is_configuration_problem(&self) -> bool {
        !matches!(self, MqttError::NoRuntime)
    }
}

/// PEM files for a TLS connection, read at start so that a bad path fails there, not at every reconnect.
#[derive(Clone)]
pub struct TlsMaterial {
    /// CA bundle that signs the broker's certificate.
    pub ca: Vec<u8>,
    /// Client certificate and private key for mutual TLS.
    pub client_auth: Option<(Vec<u8>, Vec<u8>)>,
}

impl fmt::Debug for TlsMaterial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsMaterial")
            .field("ca_bytes", &self.ca.len())
            .field("client_auth", &self.client_auth.as_ref().map(|_| "<certificate and key>"))
            .finish()
    }
}

/// Everything the publisher needs, resolved from `[mqtt]` (passwords and PEM files already read).
#[derive(Clone)]
pub struct MqttSettings {
    pub host: String,
    pub port: u16,
    pub client_id: String,
    /// Topic prefix without a trailing `/`.
    pub prefix: String,
    /// QoS of everything but the status topic (always QoS 1).
    pub qos: QoS,
    /// Zero disables keep-alive; otherwise at least one second (rumqttc's resolution).
    pub keep_alive: Duration,
    /// Data messages held while the broker is away or slow; beyond, per-frame messages are dropped
    /// first (oldest first), then the oldest of the others.
    pub queue_capacity: usize,
    /// The same bound in bytes (payload and topic of every queued data message).
    pub queue_max_bytes: usize,
    pub username: Option<String>,
    pub password: Option<String>,
    pub tls: Option<TlsMaterial>,
    /// Longest wait at shutdown for queued QoS ≥ 1 messages to be acknowledged.
    pub shutdown_flush: Duration,
    pub reconnect_min: Duration,
    pub reconnect_max: Duration,
}

impl fmt::Debug for MqttSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MqttSettings")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("client_id", &self.client_id)
            .field("prefix", &self.prefix)
            .field("qos", &self.qos)
            .field("keep_alive", &self.keep_alive)
            .field("queue_capacity", &self.queue_capacity)
            .field("queue_max_bytes", &self.queue_max_bytes)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("tls", &self.tls)
            .field("shutdown_flush", &self.shutdown_flush)
            .field("reconnect_min", &self.reconnect_min)
            .field("reconnect_max", &self.reconnect_max)
            .finish()
    }
}

impl MqttSettings {
    /// Resolves defaults and reads the password and TLS files the config names.
    pub fn from_config(config: &Config) -> Result<MqttSettings, MqttError> {
        let mqtt = &config.mqtt;
        let password = match (&mqtt.password_file, &mqtt.password_env) {
            (Some(path), _) => Some(read_password_file(path)?),
            (None, Some(name)) => Some(std::env::var(name).map_err(|_| MqttError::PasswordEnv { name: name.clone() })?),
            (None, None) => None,
        };
        let tls = match &mqtt.tls {
            Some(tls) => Some(TlsMaterial {
                ca: read_certificates(&tls.ca_file, "ca_file")?,
                client_auth: match (&tls.client_cert, &tls.client_key) {
                    (Some(cert), Some(key)) => Some((read_certificates(cert, "client_cert")?, read_private_key(key)?)),
                    _ => None,
                },
            }),
            None => None,
        };
        Ok(MqttSettings {
            host: mqtt.host.clone(),
            port: mqtt.port,
            client_id: config.client_id(),
            prefix: config.topic_prefix(),
            qos: match mqtt.qos {
                0 => QoS::AtMostOnce,
                1 => QoS::AtLeastOnce,
                _ => QoS::ExactlyOnce,
            },
            keep_alive: Duration::from_secs(u64::from(mqtt.keep_alive_s)),
            queue_capacity: mqtt.queue_capacity,
            queue_max_bytes: usize::try_from(u64::from(mqtt.queue_max_mib) << 20).unwrap_or(usize::MAX),
            username: mqtt.username.clone(),
            password,
            tls,
            shutdown_flush: Duration::from_millis(mqtt.shutdown_flush_ms),
            reconnect_min: Duration::from_millis(mqtt.reconnect_min_ms),
            reconnect_max: Duration::from_millis(mqtt.reconnect_max_ms),
        })
    }

    fn status_topic(&self) -> String {
        format!("{}/status", self.prefix)
    }

    fn mqtt_options(&self) -> MqttOptions {
        let mut options = MqttOptions::new(self.client_id.clone(), self.host.clone(), self.port);
        let keep_alive =
            if self.keep_alive.is_zero() { Duration::ZERO } else { self.keep_alive.max(Duration::from_secs(1)) };
        options
            .set_keep_alive(keep_alive)
            .set_clean_session(true)
            .set_inflight(MAX_IN_FLIGHT)
            .set_max_packet_size(64 * 1024, MAX_PAYLOAD_BYTES + MAX_TOPIC_BYTES + 16)
            .set_last_will(LastWill::new(self.status_topic(), STATUS_OFFLINE, QoS::AtLeastOnce, true));
        if let Some(username) = &self.username {
            options.set_credentials(username.clone(), self.password.clone().unwrap_or_default());
        }
        if let Some(tls) = &self.tls {
            options.set_transport(Transport::tls(tls.ca.clone(), tls.client_auth.clone(), None));
        }
        options
    }
}

/// The first line of the password file (a regular file of at most [`MAX_PASSWORD_BYTES`]).
fn read_password_file(path: &Path) -> Result<String, MqttError> {
    let text = files::read_to_string(path, MAX_PASSWORD_BYTES)
        .map_err(|source| MqttError::PasswordFile { path: path.to_path_buf(), source })?;
    let first_line = text.lines().next().unwrap_or_default();
    if first_line.is_empty() {
        return Err(MqttError::EmptyPassword { path: path.to_path_buf() });
    }
    Ok(first_line.to_string())
}

/// A PEM file (at most [`MAX_PEM_BYTES`]) whose PEM blocks all decode, with at least one block
/// labelled `expected`.
fn read_pem(path: &Path, key: &'static str, expected: &'static str) -> Result<Vec<u8>, MqttError> {
    let bytes = files::read(path, MAX_PEM_BYTES).map_err(|source| MqttError::TlsFile {
        key,
        path: path.to_path_buf(),
        source,
    })?;
    let text = String::from_utf8_lossy(&bytes);
    let has_block = text.match_indices("-----BEGIN ").any(|(at, _)| {
        text[at..].lines().next().is_some_and(|line| line.trim_end().ends_with(&format!("{expected}-----")))
    });
    if !has_block {
        return Err(MqttError::TlsPem { key, path: path.to_path_buf(), expected });
    }
    Ok(bytes)
}

/// A PEM certificate file checked as the TLS connection will use it (the same PEM parser as
/// rumqttc, and every certificate parsed as X.509), so bad content is found at start, naming the
/// key and the file, not at every connection attempt.
fn read_certificates(path: &Path, key: &'static str) -> Result<Vec<u8>, MqttError> {
    let bytes = read_pem(path, key, "CERTIFICATE")?;
    let content = |reason: String| MqttError::TlsContent { key, path: path.to_path_buf(), reason };
    let certificates = rustls_pemfile::certs(&mut std::io::Cursor::new(&bytes))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| content(format!("a PEM block does not decode ({e})")))?;
    let mut roots = tokio_rustls::rustls::RootCertStore::empty();
    let (valid, invalid) = roots.add_parsable_certificates(certificates);
    if valid == 0 || invalid > 0 {
        return Err(content(format!("{invalid} of {} certificate(s) do not parse as X.509", valid + invalid)));
    }
    Ok(bytes)
}

/// A PEM private key file checked as the TLS connection will use it.
fn read_private_key(path: &Path) -> Result<Vec<u8>, MqttError> {
    let key = "client_key";
    let bytes = read_pem(path, key, "PRIVATE KEY")?;
    let content = |reason: String| MqttError::TlsContent { key, path: path.to_path_buf(), reason };
    let mut reader = std::io::Cursor::new(&bytes);
    loop {
        match rustls_pemfile::read_one(&mut reader) {
            Ok(Some(
                rustls_pemfile::Item::Pkcs1Key(_)
                | rustls_pemfile::Item::Pkcs8Key(_)
                | rustls_pemfile::Item::Sec1Key(_),
            )) => return Ok(bytes),
            Ok(Some(_)) => {}
            Ok(None) => return Err(content("no PKCS#1, PKCS#8 or SEC1 private key in the file".into())),
            Err(e) => return Err(content(format!("a PEM block does not decode ({e})"))),
        }
    }
}

/// Counters for telemetry and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct MqttStats {
    /// A CONNACK was received and the connection has not failed since.
    pub connected: bool,
    /// Messages accepted and not yet acknowledged (QoS ≥ 1) or written (QoS 0), status messages included.
    pub queued: usize,
    /// Bytes (payload and topic) of the queued data messages, what `mqtt.queue_max_mib` bounds.
    pub queued_bytes: usize,
    /// Messages dropped: by the queue bounds (per-frame messages first, then the oldest), for being
    /// too large or having an invalid topic, or for arriving after `shutdown()`.
    pub dropped: u64,
    /// Messages acknowledged by the broker (QoS ≥ 1) or written to it (QoS 0), status messages included.
    pub published: u64,
    /// Successful connections after the first.
    pub reconnects: u64,
    /// Connections the broker closed right after accepting them, while that looked like another
    /// client taking the session over (same client id): see [`TakeoverWatch`].
    pub takeovers: u64,
}

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
        Self::start_with_status(settings, STATUS_ONLINE)
    }

    /// [`start`](Self::start) with another retained status while connected ([`STATUS_BUILDING`]
    /// before the engine is ready), until [`set_status`](Self::set_status) says otherwise.
    pub fn start_with_status(settings: MqttSettings, status: &'static str) -> Result<Publisher, MqttError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| MqttError::NoRuntime)?;
        let (client, eventloop) = AsyncClient::new(settings.mqtt_options(), usize::from(MAX_IN_FLIGHT) + 2);
        let shared = Arc::new(Shared {
            outbox: Mutex::new(Outbox::new(settings.queue_capacity, settings.queue_max_bytes, settings.status_topic())),
            wake: Notify::new(),
        });
        lock(&shared.outbox).status = status;
        let prefix: Arc<str> = settings.prefix.clone().into();
        let qos = settings.qos;
        let connection = Connection { client, shared: Arc::clone(&shared), settings };
        let handle = runtime.spawn(connection.run(eventloop));
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
        outbox.set_status(message, StatusPosition::Last);
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

    fn enqueue(&self, topic: String, payload: Vec<u8>, retain: bool, per_frame: bool) {
        let rejection = if payload.len() > MAX_PAYLOAD_BYTES {
            Some("payload too large")
        } else if topic.is_empty() || topic.len() > MAX_TOPIC_BYTES || topic.contains(['+', '#', '\0']) {
            Some("invalid topic")
        } else {
            None
        };
        if let Some(reason) = rejection {
            log::warn!("MQTT: dropping a {} byte message for {topic:?}: {reason}", payload.len());
            lock(&self.shared.outbox).dropped += 1;
            return;
        }
        let message = Message { topic, payload, qos: self.qos, retain, is_status: false, per_frame };
        lock(&self.shared.outbox).push(message);
        self.shared.wake.notify_one();
    }

    pub fn stats(&self) -> MqttStats {
        lock(&self.shared.outbox).stats()
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
                outbox.set_status(offline, StatusPosition::Last);
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

struct Shared {
    outbox: Mutex<Outbox>,
    /// Wakes the connection task: new message, or shutdown.
    wake: Notify,
}

#[derive(Debug, Clone, PartialEq)]
struct Message {
    topic: String,
    payload: Vec<u8>,
    qos: QoS,
    retain: bool,
    /// Status messages are exempt from the queue bound; only the latest waiting one is kept.
    is_status: bool,
    /// Detections and snapshots: dropped before anything else when the queue is full.
    per_frame: bool,
}

impl Message {
    /// What the byte bound counts.
    fn bytes(&self) -> usize {
        self.payload.len() + self.topic.len()
    }
}

/// A message handed to rumqttc. `message` is `None` once the queue bound dropped it: the entry
/// stays until its `Outgoing::Publish` event or acknowledgement so that the matching stays in step.
#[derive(Debug)]
struct InFlight {
    message: Option<Message>,
    qos: QoS,
    /// Set by `Outgoing::Publish`; `None` until rumqttc has written the packet.
    pkid: Option<u16>,
}

enum StatusPosition {
    /// Before everything waiting: `online` after a (re)connect.
    First,
    /// After everything waiting: `offline` at shutdown.
    Last,
}

/// Messages not yet acknowledged, oldest first: `in_flight` (handed to rumqttc, in hand-over
/// order) then `waiting`.
#[derive(Debug)]
struct Outbox {
    waiting: VecDeque<Message>,
    in_flight: VecDeque<InFlight>,
    capacity: usize,
    max_bytes: usize,
    /// Live data (non-status) messages in `waiting` and `in_flight`, and their bytes.
    data_len: usize,
    data_bytes: usize,
    status_topic: String,
    /// What the status topic says while connected: [`STATUS_ONLINE`], or [`STATUS_BUILDING`].
    status: &'static str,
    connected: bool,
    closing: bool,
    dropped: u64,
    published: u64,
    reconnects: u64,
    takeovers: u64,
}

impl Outbox {
    fn new(capacity: usize, max_bytes: usize, status_topic: String) -> Outbox {
        Outbox {
            waiting: VecDeque::with_capacity(capacity.min(1024)),
            in_flight: VecDeque::with_capacity(usize::from(MAX_IN_FLIGHT)),
            capacity: capacity.max(1),
            max_bytes,
            data_len: 0,
            data_bytes: 0,
            status_topic,
            status: STATUS_ONLINE,
            connected: false,
            closing: false,
            dropped: 0,
            published: 0,
            reconnects: 0,
            takeovers: 0,
        }
    }

    fn status_message(&self, payload: &str) -> Message {
        Message {
            topic: self.status_topic.clone(),
            payload: payload.as_bytes().to_vec(),
            qos: QoS::AtLeastOnce,
            retain: true,
            is_status: true,
            per_frame: false,
        }
    }

    fn push(&mut self, message: Message) {
        if self.closing {
            self.dropped += 1;
            return;
        }
        let bytes = message.bytes();
        while self.data_len >= self.capacity || (self.data_len > 0 && self.data_bytes + bytes > self.max_bytes) {
            // Events and counts are what subscribers act on: per-frame messages go first, and a
            // per-frame message never pushes one of them out.
            if !self.drop_oldest(|m| m.per_frame) && (message.per_frame || !self.drop_oldest(|_| true)) {
                self.dropped += 1;
                return;
            }
        }
        self.data_len += 1;
        self.data_bytes += bytes;
        self.waiting.push_back(message);
    }

    /// Drops the oldest live data message that `wanted` picks; whether there was one.
    fn drop_oldest(&mut self, wanted: impl Fn(&Message) -> bool) -> bool {
        let pick = |m: &Message| !m.is_status && wanted(m);
        let bytes = if let Some(entry) = self.in_flight.iter_mut().find(|e| e.message.as_ref().is_some_and(pick)) {
            entry.message.take().map_or(0, |m| m.bytes())
        } else if let Some(index) = self.waiting.iter().position(pick) {
            self.waiting.remove(index).map_or(0, |m| m.bytes())
        } else {
            return false;
        };
        self.data_len -= 1;
        self.data_bytes -= bytes;
        self.dropped += 1;
        true
    }

    /// Replaces any waiting status message: only the latest state matters for a retained topic.
    fn set_status(&mut self, message: Message, position: StatusPosition) {
        self.waiting.retain(|m| !m.is_status);
        match position {
            StatusPosition::First => self.waiting.push_front(message),
            StatusPosition::Last => self.waiting.push_back(message),
        }
    }

    /// Moves the next waiting message to `in_flight` and returns what to hand to rumqttc.
    fn hand_over_next(&mut self) -> Option<Message> {
        if !self.connected || self.in_flight.len() >= usize::from(MAX_IN_FLIGHT) {
            return None;
        }
        let message = self.waiting.pop_front()?;
        let handed = message.clone();
        self.in_flight.push_back(InFlight { qos: message.qos, message: Some(message), pkid: None });
        Some(handed)
    }

    /// Undoes the last [`Outbox::hand_over_next`] when rumqttc did not take the message.
    fn take_back_last(&mut self) {
        if let Some(InFlight { message: Some(message), .. }) = self.in_flight.pop_back() {
            self.waiting.push_front(message);
        }
    }

    /// rumqttc wrote the oldest handed message that had no packet id yet (`pkid` 0 for QoS 0).
    fn on_written(&mut self, pkid: u16) {
        let Some(index) = self.in_flight.iter().position(|e| e.pkid.is_none()) else {
            log::debug!("MQTT: publish {pkid} written that was not handed over by this connection");
            return;
        };
        if self.in_flight[index].qos == QoS::AtMostOnce {
            self.complete(index);
        } else {
            self.in_flight[index].pkid = Some(pkid);
        }
    }

    /// The broker acknowledged `pkid` (PUBACK for QoS 1, PUBCOMP for QoS 2).
    fn on_acknowledged(&mut self, pkid: u16) {
        if let Some(index) = self.in_flight.iter().position(|e| e.pkid == Some(pkid)) {
            self.complete(index);
        }
    }

    fn complete(&mut self, index: usize) {
        if let Some(InFlight { message: Some(message), .. }) = self.in_flight.remove(index) {
            self.published += 1;
            if !message.is_status {
                self.data_len -= 1;
                self.data_bytes -= message.bytes();
            }
        }
    }

    /// The connection failed: everything handed over and not acknowledged waits again, in order.
    fn on_connection_lost(&mut self) {
        self.connected = false;
        while let Some(entry) = self.in_flight.pop_back() {
            if let Some(message) = entry.message {
                self.waiting.push_front(message);
            }
        }
    }

    /// Nothing waits and nothing handed over awaits an acknowledgement.
    fn is_flushed(&self) -> bool {
        self.waiting.is_empty() && self.in_flight.iter().all(|e| e.message.is_none())
    }

    fn stats(&self) -> MqttStats {
        MqttStats {
            connected: self.connected,
            queued: self.waiting.len() + self.in_flight.iter().filter(|e| e.message.is_some()).count(),
            queued_bytes: self.data_bytes,
            dropped: self.dropped,
            published: self.published,
            reconnects: self.reconnects,
            takeovers: self.takeovers,
        }
    }
}

/// The connection task's state, apart from the event loop that its `run` drives.
struct Connection {
    client: AsyncClient,
    shared: Arc<Shared>,
    settings: MqttSettings,
}

/// A session that lasts less than this after its CONNACK counts as closed right away.
const SHORT_SESSION: Duration = Duration::from_secs(2);
/// Short sessions in a row that mean another client takes the session over.
const TAKEOVER_STREAK: u32 = 3;

/// Tells a session taken over by another client with the same client id (two daemons from one
/// cloned SD card) from an ordinary outage: the broker accepts the connection and closes it right
/// away, again and again, each client throwing the other out. Reconnecting at once would make the
/// two flap the retained status every half second; the connection task backs off instead.
#[derive(Debug, Default)]
struct TakeoverWatch {
    connected_at: Option<Instant>,
    short_in_a_row: u32,
}

impl TakeoverWatch {
    fn connected(&mut self, now: Instant) {
        self.connected_at = Some(now);
    }

    /// The connection ended at `now`: whether the streak of sessions closed right after their
    /// CONNACK says the session is being taken over.
    fn lost(&mut self, now: Instant) -> bool {
        match self.connected_at.take() {
            Some(at) if now.saturating_duration_since(at) < SHORT_SESSION => self.short_in_a_row += 1,
            Some(_) => self.short_in_a_row = 0,
            None => {}
        }
        self.short_in_a_row >= TAKEOVER_STREAK
    }
}

/// What the connection task does after handling something.
#[derive(PartialEq)]
enum Next {
    Continue,
    Stop,
}

impl Connection {
    async fn run(self, mut eventloop: EventLoop) {
        let broker = format!("{}:{}", self.settings.host, self.settings.port);
        let mut retry_delay = self.settings.reconnect_min;
        let mut ever_connected = false;
        // Set once shutdown has been requested: the end of the flush window.
        let mut flush_deadline: Option<Instant> = None;
        let mut disconnect_sent = false;
        let mut takeover = TakeoverWatch::default();
        loop {
            let polled = {
                // The poll future stays alive while new messages are handed over: cancelling it
                // part-way through a write is not something rumqttc promises to survive.
                let poll = eventloop.poll();
                tokio::pin!(poll);
                loop {
                    tokio::select! {
                        polled = &mut poll => break Some(polled),
                        () = self.shared.wake.notified() => {
                            hand_over(&self.client, &self.shared);
                            if self.shutdown_step(&mut flush_deadline, &mut disconnect_sent) == Next::Stop {
                                return;
                            }
                        }
                        () = sleep_until_deadline(flush_deadline) => break None,
                    }
                }
            };
            let Some(polled) = polled else {
                if !disconnect_sent {
                    self.flush_timed_out();
                }
                return;
            };
            match polled {
                Ok(event) => {
                    if matches!(event, Event::Incoming(Packet::ConnAck(_))) {
                        takeover.connected(Instant::now());
                    }
                    if self.handle_event(event, &broker, &mut ever_connected) == Next::Stop {
                        return;
                    }
                    retry_delay = self.settings.reconnect_min;
                }
                Err(error) => {
                    // rumqttc keeps events it buffered before the failure (acks read in the same
                    // batch, the write that failed) and hands them out after the next CONNACK,
                    // where they would be matched against re-sent messages; a stale collision would
                    // block the new connection. Both belong to the dead connection: what they
                    // acknowledged is re-sent (a duplicate at worst).
                    eventloop.state.events.clear();
                    eventloop.state.collision = None;
                    let was_connected = {
                        let mut outbox = lock(&self.shared.outbox);
                        let was_connected = outbox.connected;
                        outbox.on_connection_lost();
                        was_connected
                    };
                    if disconnect_sent {
                        return;
                    }
                    if was_connected && takeover.lost(Instant::now()) {
                        retry_delay = self.settings.reconnect_max;
                        let streak = takeover.short_in_a_row;
                        lock(&self.shared.outbox).takeovers += 1;
                        log::error!(
                            "MQTT: {broker} closed the connection right after accepting it, {streak} times in a row: \
                             another client is probably using the client id {:?} (two devices from one cloned SD \
                             card?) and each throws the other out; give each daemon its own mqtt.client_id. \
                             Reconnecting in {retry_delay:?}",
                            self.settings.client_id
                        );
                    } else if was_connected {
                        log::info!("MQTT: connection to {broker} lost: {error}; reconnecting in {retry_delay:?}");
                    } else {
                        log::warn!("MQTT: cannot connect to {broker}: {error}; retrying in {retry_delay:?}");
                    }
                    if self.shutdown_step(&mut flush_deadline, &mut disconnect_sent) == Next::Stop {
                        return;
                    }
                    let retry_at = Instant::now() + retry_delay;
                    loop {
                        tokio::select! {
                            () = tokio::time::sleep_until(retry_at) => break,
                            // A shutdown must not wait for the end of a long backoff.
                            () = self.shared.wake.notified() => {
                                if self.shutdown_step(&mut flush_deadline, &mut disconnect_sent) == Next::Stop {
                                    return;
                                }
                            }
                            () = sleep_until_deadline(flush_deadline) => {
                                self.flush_timed_out();
                                return;
                            }
                        }
                    }
                    retry_delay = (retry_delay * 2).min(self.settings.reconnect_max);
                    continue;
                }
            }
            hand_over(&self.client, &self.shared);
            if self.shutdown_step(&mut flush_deadline, &mut disconnect_sent) == Next::Stop {
                return;
            }
        }
    }

    fn handle_event(&self, event: Event, broker: &str, ever_connected: &mut bool) -> Next {
        match event {
            Event::Incoming(Packet::ConnAck(_)) => {
                let mut outbox = lock(&self.shared.outbox);
                outbox.connected = true;
                if *ever_connected {
                    outbox.reconnects += 1;
                }
                // During shutdown the queued `offline` must stay the last word.
                if !outbox.closing {
                    let status = outbox.status_message(outbox.status);
                    outbox.set_status(status, StatusPosition::First);
                }
                let queued = outbox.waiting.len();
                drop(outbox);
                *ever_connected = true;
                log::info!("MQTT: connected to {broker} as {} ({queued} messages queued)", self.settings.client_id);
            }
            Event::Outgoing(Outgoing::Publish(pkid)) => lock(&self.shared.outbox).on_written(pkid),
            Event::Incoming(Packet::PubAck(ack)) => lock(&self.shared.outbox).on_acknowledged(ack.pkid),
            Event::Incoming(Packet::PubComp(comp)) => lock(&self.shared.outbox).on_acknowledged(comp.pkid),
            Event::Outgoing(Outgoing::Disconnect) => {
                lock(&self.shared.outbox).connected = false;
                log::info!("MQTT: disconnected from {broker}");
                return Next::Stop;
            }
            _ => {}
        }
        Next::Continue
    }

    /// Once shutdown is requested: start the flush window, and when everything is acknowledged,
    /// disconnect (or stop at once when there is no connection to close).
    fn shutdown_step(&self, flush_deadline: &mut Option<Instant>, disconnect_sent: &mut bool) -> Next {
        let outbox = lock(&self.shared.outbox);
        if !outbox.closing {
            return Next::Continue;
        }
        if flush_deadline.is_none() {
            *flush_deadline = Some(Instant::now() + self.settings.shutdown_flush);
        }
        if !outbox.is_flushed() || *disconnect_sent {
            return Next::Continue;
        }
        if !outbox.connected {
            return Next::Stop;
        }
        drop(outbox);
        if self.client.try_disconnect().is_err() {
            return Next::Stop;
        }
        *disconnect_sent = true;
        Next::Continue
    }

    fn flush_timed_out(&self) {
        let queued = lock(&self.shared.outbox).stats().queued;
        log::warn!(
            "MQTT: {queued} messages not acknowledged within {:?} of shutdown; closing the connection \
             without DISCONNECT so the broker publishes the Last Will",
            self.settings.shutdown_flush
        );
    }
}

/// Hands waiting messages to rumqttc while connected and the in-flight window has room. The
/// request channel holds more than the window, so `try_publish` only fails if the event loop is gone.
fn hand_over(client: &AsyncClient, shared: &Shared) {
    loop {
        let Some(message) = lock(&shared.outbox).hand_over_next() else {
            return;
        };
        if let Err(error) = client.try_publish(message.topic, message.qos, message.retain, message.payload) {
            log::warn!("MQTT: could not hand a message to the client: {error}");
            lock(&shared.outbox).take_back_last();
            return;
        }
    }
}

async fn sleep_until_deadline(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;
    use crate::config::ConfigOrigin;

    fn data(n: u32) -> Message {
        Message {
            topic: "p/cam/detections".into(),
            payload: n.to_string().into_bytes(),
            qos: QoS::AtLeastOnce,
            retain: false,
            is_status: false,
            per_frame: false,
        }
    }

    fn payloads(outbox: &Outbox) -> Vec<String> {
        let in_flight = outbox.in_flight.iter().filter_map(|e| e.message.as_ref());
        in_flight.chain(&outbox.waiting).map(|m| String::from_utf8_lossy(&m.payload).into_owned()).collect()
    }

    #[test]
    fn full_queue_drops_the_oldest_data_but_keeps_status() {
        let mut outbox = Outbox::new(3, usize::MAX, "p/status".into());
        let online = outbox.status_message(STATUS_ONLINE);
        outbox.set_status(online, StatusPosition::First);
        for n in 0..5 {
            outbox.push(data(n));
        }
        assert_eq!(payloads(&outbox), ["online", "2", "3", "4"]);
        assert_eq!(outbox.stats().dropped, 2);
        assert_eq!(outbox.stats().queued, 4);
    }

    #[test]
    fn sessions_closed_right_after_connack_three_times_in_a_row_are_a_takeover() {
        let mut at = Instant::now();
        let mut watch = TakeoverWatch::default();
        let short_session = |watch: &mut TakeoverWatch, at: &mut Instant| {
            watch.connected(*at);
            *at += Duration::from_millis(300);
            let verdict = watch.lost(*at);
            *at += Duration::from_millis(500);
            verdict
        };
        assert!(!short_session(&mut watch, &mut at));
        assert!(!short_session(&mut watch, &mut at));
        assert!(short_session(&mut watch, &mut at), "the third in a row");
        assert!(short_session(&mut watch, &mut at), "and every one after it");
        watch.connected(at);
        assert!(!watch.lost(at + Duration::from_secs(60)), "a session that lasted ends the streak");
        assert!(!watch.lost(at + Duration::from_secs(61)), "a failed connect attempt is no session");
        at += Duration::from_secs(62);
        assert!(!short_session(&mut watch, &mut at));
    }

    #[test]
    fn a_full_queue_drops_per_frame_messages_before_events_and_counts() {
        let event = |n: u32| Message { topic: "p/cam/events".into(), ..data(n) };
        let frame = |n: u32| Message { per_frame: true, ..data(n) };
        let mut outbox = Outbox::new(3, usize::MAX, "p/status".into());
        outbox.push(frame(0));
        outbox.push(event(1));
        outbox.push(frame(2));
        outbox.push(event(3));
        outbox.push(event(4));
        assert_eq!(payloads(&outbox), ["1", "3", "4"], "both detections went before any event");
        outbox.push(frame(5));
        assert_eq!(payloads(&outbox), ["1", "3", "4"], "a detection never pushes an event out");
        outbox.push(event(6));
        assert_eq!(payloads(&outbox), ["3", "4", "6"], "with no detection left, the oldest event goes");
        assert_eq!(outbox.stats().dropped, 4);
    }

    #[test]
    fn the_queue_is_bounded_by_bytes_too() {
        // A snapshot may be 8 MiB: 1000 of them must not be held.
        let snapshot = |n: u32| Message { topic: "p/cam/snapshot".into(), payload: vec![n as u8; 1000], ..data(n) };
        let mut outbox = Outbox::new(1000, 2500, "p/status".into());
        for n in 0..5 {
            outbox.push(Message { per_frame: true, ..snapshot(n) });
        }
        let stats = outbox.stats();
        assert_eq!((stats.queued, stats.dropped), (2, 3));
        assert_eq!(stats.queued_bytes, 2 * (1000 + "p/cam/snapshot".len()));
        assert!(stats.queued_bytes <= 2500);
        outbox.connected = true;
        while outbox.hand_over_next().is_some() {}
        outbox.on_written(1);
        outbox.on_acknowledged(1);
        assert_eq!(outbox.stats().queued_bytes, 1000 + "p/cam/snapshot".len(), "acknowledged bytes leave the count");
    }

    #[test]
    fn acknowledgements_follow_hand_over_order_and_loss_requeues() {
        let mut outbox = Outbox::new(10, usize::MAX, "p/status".into());
        outbox.connected = true;
        for n in 0..3 {
            outbox.push(data(n));
        }
        while outbox.hand_over_next().is_some() {}
        outbox.on_written(7);
        outbox.on_written(8);
        outbox.on_acknowledged(7);
        assert_eq!(payloads(&outbox), ["1", "2"]);
        outbox.on_connection_lost();
        assert!(outbox.in_flight.is_empty());
        assert_eq!(payloads(&outbox), ["1", "2"]);
        assert_eq!(outbox.hand_over_next(), None, "nothing is handed over while disconnected");
        assert_eq!(outbox.stats().published, 1);
        assert!(!outbox.is_flushed());
    }

    #[test]
    fn dropping_an_in_flight_message_keeps_the_matching_in_step() {
        let mut outbox = Outbox::new(2, usize::MAX, "p/status".into());
        outbox.connected = true;
        outbox.push(data(0));
        outbox.push(data(1));
        while outbox.hand_over_next().is_some() {}
        outbox.push(data(2));
        assert_eq!(payloads(&outbox), ["1", "2"]);
        outbox.on_written(1);
        outbox.on_written(2);
        outbox.on_acknowledged(1);
        outbox.on_acknowledged(2);
        assert_eq!(payloads(&outbox), ["2"]);
        let stats = MqttStats {
            connected: true,
            queued: 1,
            queued_bytes: 17,
            dropped: 1,
            published: 1,
            reconnects: 0,
            takeovers: 0,
        };
        assert_eq!(outbox.stats(), stats);
    }

    #[test]
    fn qos0_completes_when_written_and_closing_refuses_new_messages() {
        let mut outbox = Outbox::new(4, usize::MAX, "p/status".into());
        outbox.connected = true;
        outbox.push(Message { qos: QoS::AtMostOnce, ..data(0) });
        while outbox.hand_over_next().is_some() {}
        outbox.on_written(0);
        assert!(outbox.is_flushed());
        outbox.closing = true;
        outbox.push(data(1));
        assert_eq!(outbox.stats().dropped, 1);
        assert!(outbox.is_flushed());
    }

    #[test]
    fn hand_over_respects_the_in_flight_window() {
        let mut outbox = Outbox::new(1000, usize::MAX, "p/status".into());
        outbox.connected = true;
        for n in 0..200 {
            outbox.push(data(n));
        }
        let mut handed = 0;
        while outbox.hand_over_next().is_some() {
            handed += 1;
        }
        assert_eq!(handed, usize::from(MAX_IN_FLIGHT));
    }

    fn config(mqtt: &str) -> Result<Config, crate::config::ConfigError> {
        let text = format!(
            r#"
            [device]
            id = "dev1"
            [model]
            onnx = "m.onnx"
            labels = "l.txt"
            decoder = "ssd"
            input = {{ width = 300, height = 300, layout = "nhwc", dtype = "u8" }}
            [[camera]]
            name = "front"
            source = {{ kind = "synthetic" }}
            [mqtt]
            {mqtt}
            "#
        );
        Config::from_toml(&text, ConfigOrigin::File("test.toml".into()), Path::new("/base"))
    }

    #[test]
    fn settings_from_config_read_password_and_redact_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let password_path = dir.path().join("password");
        let mut file = std::fs::File::create(&password_path).expect("create");
        writeln!(file, "s3cret word\nignored").expect("write");
        let toml = format!("username = \"u\"\npassword_file = {:?}\nqos = 2", password_path.display().to_string());
        let settings = MqttSettings::from_config(&config(&toml).expect("config")).expect("settings");
        assert_eq!(settings.password.as_deref(), Some("s3cret word"));
        assert!(settings.client_id.starts_with("jetson-detectd-dev1"), "{}", settings.client_id);
        assert_eq!(settings.prefix, "jetson-detectd/dev1");
        assert_eq!(settings.qos, QoS::ExactlyOnce);
        let debug = format!("{settings:?}");
        assert!(!debug.contains("s3cret"), "{debug}");
        assert!(debug.contains("<redacted>"), "{debug}");
    }

    #[test]
    fn settings_errors_name_the_key_and_file() {
        let missing = config("username = \"u\"\npassword_file = \"/nonexistent/pw\"").expect("config");
        let error = MqttSettings::from_config(&missing).expect_err("missing file").to_string();
        assert!(error.contains("mqtt.password_file /nonexistent/pw"), "{error}");

        let env = config("username = \"u\"\npassword_env = \"JETSON_DETECTD_TEST_UNSET_VARIABLE\"").expect("config");
        let error = MqttSettings::from_config(&env).expect_err("unset env").to_string();
        assert!(error.contains("JETSON_DETECTD_TEST_UNSET_VARIABLE"), "{error}");

        let dir = tempfile::tempdir().expect("tempdir");
        let not_pem = dir.path().join("ca.der");
        std::fs::write(&not_pem, [0x30, 0x82, 0x01]).expect("write");
        let tls = config(&format!("tls = {{ ca_file = {:?} }}", not_pem.display().to_string())).expect("config");
        let error = MqttSettings::from_config(&tls).expect_err("not PEM").to_string();
        assert!(error.contains("mqtt.tls.ca_file") && error.contains("CERTIFICATE"), "{error}");
    }

    /// A self-signed test CA (`openssl req -x509 -newkey ec`); its key was thrown away.
    const TEST_CA: &str = "-----BEGIN CERTIFICATE-----
MIIBmjCCAT+gAwIBAgIUapslTokTT/SiK1VtztVCAMvdtyowCgYIKoZIzj0EAwIw
ITEfMB0GA1UEAwwWamV0c29uLWRldGVjdGQgdGVzdCBDQTAgFw0yNjExMjUwOTEy
MDJaGA8yMTI2MTEwMTA5MTIwMlowITEfMB0GA1UEAwwWamV0c29uLWRldGVjdGQg
dGVzdCBDQTBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABLopJzskjPYo2siuUXg7
mIh1vKdciQHtwad12pd7kDH2OK2cbqSlBaQsriAZsYryB/EJKU50UvzhDeipvqZj
3BijUzBRMB0GA1UdDgQWBBSvC1xGszNelvX4S7Ng+ghd9kbjsjAfBgNVHSMEGDAW
gBSvC1xGszNelvX4S7Ng+ghd9kbjsjAPBgNVHRMBAf8EBTADAQH/MAoGCCqGSM49
BAMCA0kAMEYCIQCm4pq+Hb0Akex0V8C+bjcNGnaVB/Csn9CoXoaMyKuQTAIhAKtt
lwUH9wlJdHngkmFawTQ3Yy/YyAKjjZOX2ZnkWLNb
-----END CERTIFICATE-----
";

    #[test]
    fn pem_check_accepts_certificates_and_keys() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cert = dir.path().join("c.pem");
        let key = dir.path().join("k.pem");
        std::fs::write(&cert, format!("junk\n{TEST_CA}")).expect("write");
        std::fs::write(&key, "-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n").expect("write");
        assert!(read_certificates(&cert, "ca_file").is_ok());
        assert!(read_private_key(&key).is_ok());
        assert!(read_certificates(&key, "client_cert").is_err());
    }

    /// Issue 21: armour around content that is not base64, or not a certificate, was found only
    /// at connect ("TLS: I/O: InvalidCharacter(33)"), naming neither the key nor the file.
    #[test]
    fn a_certificate_with_bad_content_is_refused_at_start_naming_key_and_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cases = [
            ("not-base64.pem", "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n"),
            ("not-x509.pem", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"),
        ];
        for (name, text) in cases {
            let path = dir.path().join(name);
            std::fs::write(&path, text).expect("write");
            let error = read_certificates(&path, "ca_file").expect_err(name).to_string();
            assert!(error.starts_with(&format!("mqtt.tls.ca_file {}: ", path.display())), "{error}");
            assert!(matches!(read_certificates(&path, "ca_file"), Err(MqttError::TlsContent { .. })));
        }
    }

    #[test]
    fn password_and_pem_files_are_bounded_and_must_be_regular_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let huge = dir.path().join("huge");
        std::fs::File::create(&huge).and_then(|file| file.set_len(1 << 30)).expect("sparse file");
        for path in [Path::new("/dev/zero"), dir.path(), huge.as_path()] {
            let error = read_password_file(path).expect_err("refused");
            assert!(error.is_configuration_problem() && error.to_string().contains("mqtt.password_file"), "{error}");
            let error = read_certificates(path, "ca_file").expect_err("refused");
            assert!(error.is_configuration_problem() && error.to_string().contains("mqtt.tls.ca_file"), "{error}");
        }
        let not_utf8 = dir.path().join("password");
        std::fs::write(&not_utf8, [0xff, 0xfe, b'\n']).expect("write");
        assert!(read_password_file(&not_utf8).expect_err("not UTF-8").to_string().contains("UTF-8"));
    }

    #[test]
    fn start_outside_a_runtime_is_an_error() {
        let settings = MqttSettings::from_config(&config("").expect("config")).expect("settings");
        assert!(matches!(Publisher::start(settings), Err(MqttError::NoRuntime)));
    }
}
