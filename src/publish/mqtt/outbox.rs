//! The outbox: every message between the [`Publisher`](super::publisher::Publisher) handle and the broker's
//! acknowledgement, bounded in messages and bytes.
//!
//! Owns: the queue bounds and what they drop first (per-frame messages, then the oldest data; the
//! status and the retained state are exempt, and only the latest value of each waits), the retained
//! state ([`RetainedStates`]) and re-queueing it, with the status, after every CONNACK
//! ([`Outbox::resync`]), the in-flight window, tying packet ids to
//! messages, re-queueing what a lost connection did not acknowledge, and the counters
//! ([`MqttStats`]). Must not: do I/O or wait: the handle and the connection task only lock it to
//! change it.
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

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;

use rumqttc::QoS;
use serde::Serialize;
use tokio::sync::Notify;

use super::message::Message;
use super::retained::{RetainedStates, StateClass};

/// Payload of the retained status topic while connected.
pub const STATUS_ONLINE: &str = "online";
/// Payload of the retained status topic while the engine is being built at start (minutes on a
/// Jetson): connected, not detecting yet.
pub const STATUS_BUILDING: &str = "building";
/// Payload of the status topic after a clean shutdown, and of the Last Will.
pub const STATUS_OFFLINE: &str = "offline";
/// Messages handed to rumqttc and not yet acknowledged; also rumqttc's in-flight window.
pub const MAX_IN_FLIGHT: u16 = 64;

/// The outbox's counters: the MQTT outlet's figures (telemetry's `outlets.mqtt`, `/metrics`, the page).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct MqttStats {
    /// A connection is up: a CONNACK was received and the connection has not failed since.
    pub connected: bool,
    /// Messages accepted and not yet acknowledged (QoS ≥ 1) or written (QoS 0), status messages included.
    pub queued: usize,
    /// Bytes (payload and topic) of the queued data messages, what `mqtt.queue_max_mib` bounds.
    pub queued_bytes: usize,
    /// Messages dropped: by the queue bounds (per-frame messages first, then the oldest), for being
    /// too large or having an invalid topic, or for arriving after the shutdown began.
    pub dropped: u64,
    /// Messages acknowledged by the broker (QoS ≥ 1) or written to it (QoS 0), status messages included.
    pub published: u64,
    /// Successful connections after the first.
    pub reconnects: u64,
    /// Connections the broker closed right after accepting them, while that looked like another
    /// client taking the session over (same client id).
    pub takeovers: u64,
}

/// What the handle and the connection task share.
pub(super) struct Shared {
    pub(super) outbox: Mutex<Outbox>,
    /// Wakes the connection task: new message, or shutdown.
    pub(super) wake: Notify,
    /// The daemon is stopping (a signal came): its last messages may still go out, but a failed
    /// connection attempt is no longer news and is logged at debug.
    pub(super) stopping: AtomicBool,
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

/// Superseded copies of waiting state messages are dropped in one pass once there are this many,
/// and at least as many as live waiting messages.
const COMPACT_AFTER: usize = 64;

/// The state messages in `waiting`, by topic. A newer value of a topic that still waits does not
/// search the queue for the older copy (that would cost the inference worker a pass over a queue
/// of thousands during an outage, per count change): it joins at the back, and the older copy is
/// skipped when its turn comes. Older copies are always ahead of newer ones (new copies join at
/// the back; what joins at the front, taken back from rumqttc, is older than all that waits).
#[derive(Debug, Default)]
struct WaitingStates {
    /// Copies waiting per topic.
    copies: HashMap<String, usize>,
    /// Copies with a newer one of their topic behind them.
    superseded: usize,
}

impl WaitingStates {
    /// A copy of `topic` joined the queue.
    fn joined(&mut self, topic: &str) {
        let copies = self.copies.entry(topic.to_string()).or_default();
        *copies += 1;
        if *copies > 1 {
            self.superseded += 1;
        }
    }

    /// The foremost copy of `topic` left the queue: whether it was the newest (else it is skipped).
    fn left(&mut self, topic: &str) -> bool {
        match self.copies.get_mut(topic) {
            Some(copies) if *copies > 1 => {
                *copies -= 1;
                self.superseded -= 1;
                false
            }
            _ => {
                self.copies.remove(topic);
                true
            }
        }
    }

    fn clear(&mut self) {
        self.copies.clear();
        self.superseded = 0;
    }
}

/// Messages not yet acknowledged, oldest first: `in_flight` (handed to rumqttc, in hand-over
/// order) then `waiting`.
#[derive(Debug)]
pub(super) struct Outbox {
    /// Superseded state copies included ([`WaitingStates`]).
    pub(super) waiting: VecDeque<Message>,
    waiting_states: WaitingStates,
    in_flight: VecDeque<InFlight>,
    capacity: usize,
    max_bytes: usize,
    /// Live data (non-status) messages in `waiting` and `in_flight`, and their bytes.
    data_len: usize,
    data_bytes: usize,
    status_topic: String,
    /// What the status topic says while connected: [`STATUS_ONLINE`], or [`STATUS_BUILDING`].
    pub(super) status: &'static str,
    /// What is re-sent after every CONNACK, before the status.
    states: RetainedStates,
    pub(super) connected: bool,
    pub(super) closing: bool,
    pub(super) dropped: u64,
    published: u64,
    pub(super) reconnects: u64,
    pub(super) takeovers: u64,
}

impl Outbox {
    pub(super) fn new(capacity: usize, max_bytes: usize, status_topic: String) -> Outbox {
        Outbox {
            waiting: VecDeque::with_capacity(capacity.min(1024)),
            waiting_states: WaitingStates::default(),
            in_flight: VecDeque::with_capacity(usize::from(MAX_IN_FLIGHT)),
            capacity: capacity.max(1),
            max_bytes,
            data_len: 0,
            data_bytes: 0,
            status_topic,
            status: STATUS_ONLINE,
            states: RetainedStates::default(),
            connected: false,
            closing: false,
            dropped: 0,
            published: 0,
            reconnects: 0,
            takeovers: 0,
        }
    }

    pub(super) fn status_message(&self, payload: &str) -> Message {
        Message {
            topic: self.status_topic.clone(),
            payload: payload.as_bytes().to_vec(),
            qos: QoS::AtLeastOnce,
            retain: true,
            is_status: true,
            is_state: false,
            per_frame: false,
        }
    }

    /// Queues a retained state message and keeps it as its topic's state: a waiting older value of
    /// the same topic is replaced (only the latest matters), and after every CONNACK the state is
    /// sent again ([`Outbox::resync`]). An empty payload deletes the retained message and forgets
    /// the topic; the deletion itself waits, through reconnects, until the broker acknowledged it.
    pub(super) fn push_state(&mut self, class: StateClass, message: Message) {
        if self.closing {
            self.dropped += 1;
            return;
        }
        let message = Message { retain: true, is_state: true, is_status: false, per_frame: false, ..message };
        self.states.set(class, &message);
        self.waiting_states.joined(&message.topic);
        self.waiting.push_back(message);
        let superseded = self.waiting_states.superseded;
        if superseded >= COMPACT_AFTER && superseded * 2 >= self.waiting.len() {
            self.drop_superseded();
        }
    }

    /// Removes every superseded state copy from `waiting` in one pass: walking from the front,
    /// a copy of a topic with more copies left behind it is superseded.
    fn drop_superseded(&mut self) {
        let copies = &mut self.waiting_states.copies;
        self.waiting.retain(|message| {
            if !message.is_state {
                return true;
            }
            match copies.get_mut(&message.topic) {
                Some(left) if *left > 1 => {
                    *left -= 1;
                    false
                }
                _ => true,
            }
        });
        self.waiting_states.superseded = 0;
    }

    /// After a CONNACK (the broker may have lost every retained message) and when Home Assistant
    /// announces itself (it may have lost its entities): every retained state, configs first, then
    /// the status, ahead of the data still waiting. Waiting copies of them go (they are older or
    /// the same); waiting deletions stay where they are, since the retained states no longer hold
    /// their topics: a deletion is done only when the broker acknowledged it (an entity removed
    /// during an outage must not stay in Home Assistant). Not while closing: `offline` stays the
    /// last word.
    pub(super) fn resync(&mut self) {
        if self.closing {
            return;
        }
        self.waiting.retain(|waiting| waiting.is_data() || waiting.is_deletion());
        self.waiting_states.clear();
        for deletion in self.waiting.iter().filter(|message| message.is_state) {
            self.waiting_states.joined(&deletion.topic);
        }
        let status = self.status_message(self.status);
        let front: Vec<Message> = self.states.messages().cloned().chain(std::iter::once(status)).collect();
        for message in front.into_iter().rev() {
            if message.is_state {
                self.waiting_states.joined(&message.topic);
            }
            self.waiting.push_front(message);
        }
    }

    pub(super) fn push(&mut self, message: Message) {
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
        let pick = |m: &Message| m.is_data() && wanted(m);
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

    /// Replaces any waiting status message (only the latest state matters for a retained topic)
    /// and queues it after everything waiting: `online` after the counts reset at start, `offline`
    /// after the last events at shutdown.
    pub(super) fn set_status(&mut self, message: Message) {
        self.waiting.retain(|m| !m.is_status);
        self.waiting.push_back(message);
    }

    /// Moves the next waiting message to `in_flight` and returns what to hand to rumqttc.
    pub(super) fn hand_over_next(&mut self) -> Option<Message> {
        if !self.connected || self.in_flight.len() >= usize::from(MAX_IN_FLIGHT) {
            return None;
        }
        let message = loop {
            let message = self.waiting.pop_front()?;
            if !message.is_state || self.waiting_states.left(&message.topic) {
                break message;
            }
        };
        let handed = message.clone();
        self.in_flight.push_back(InFlight { qos: message.qos, message: Some(message), pkid: None });
        Some(handed)
    }

    /// Undoes the last [`Outbox::hand_over_next`] when rumqttc did not take the message.
    pub(super) fn take_back_last(&mut self) {
        if let Some(InFlight { message: Some(message), .. }) = self.in_flight.pop_back() {
            self.wait_again(message);
        }
    }

    /// rumqttc wrote the oldest handed message that had no packet id yet (`pkid` 0 for QoS 0).
    pub(super) fn on_written(&mut self, pkid: u16) {
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
    pub(super) fn on_acknowledged(&mut self, pkid: u16) {
        if let Some(index) = self.in_flight.iter().position(|e| e.pkid == Some(pkid)) {
            self.complete(index);
        }
    }

    fn complete(&mut self, index: usize) {
        if let Some(InFlight { message: Some(message), .. }) = self.in_flight.remove(index) {
            self.published += 1;
            if message.is_data() {
                self.data_len -= 1;
                self.data_bytes -= message.bytes();
            }
        }
    }

    /// The connection failed: everything handed over and not acknowledged waits again, in order.
    pub(super) fn on_connection_lost(&mut self) {
        self.connected = false;
        while let Some(entry) = self.in_flight.pop_back() {
            if let Some(message) = entry.message {
                self.wait_again(message);
            }
        }
    }

    /// A message handed over and not acknowledged goes back to the front of the queue.
    fn wait_again(&mut self, message: Message) {
        if message.is_state {
            self.waiting_states.joined(&message.topic);
        }
        self.waiting.push_front(message);
    }

    /// Nothing waits and nothing handed over awaits an acknowledgement.
    pub(super) fn is_flushed(&self) -> bool {
        self.waiting.is_empty() && self.in_flight.iter().all(|e| e.message.is_none())
    }

    pub(super) fn stats(&self) -> MqttStats {
        MqttStats {
            connected: self.connected,
            queued: self.waiting.len() - self.waiting_states.superseded
                + self.in_flight.iter().filter(|e| e.message.is_some()).count(),
            queued_bytes: self.data_bytes,
            dropped: self.dropped,
            published: self.published,
            reconnects: self.reconnects,
            takeovers: self.takeovers,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(n: u32) -> Message {
        Message {
            topic: "p/cam/detections".into(),
            payload: n.to_string().into_bytes(),
            qos: QoS::AtLeastOnce,
            retain: false,
            is_status: false,
            is_state: false,
            per_frame: false,
        }
    }

    /// What will be sent, in order: in flight, then waiting without the superseded state copies.
    fn sendable(outbox: &Outbox) -> Vec<&Message> {
        let in_flight = outbox.in_flight.iter().filter_map(|e| e.message.as_ref());
        let waiting = outbox.waiting.iter().enumerate().filter(|(index, message)| {
            let newer = |later: &Message| later.is_state && later.topic == message.topic;
            !message.is_state || !outbox.waiting.iter().skip(index + 1).any(newer)
        });
        in_flight.chain(waiting.map(|(_, message)| message)).collect()
    }

    fn payloads(outbox: &Outbox) -> Vec<String> {
        sendable(outbox).into_iter().map(|m| String::from_utf8_lossy(&m.payload).into_owned()).collect()
    }

    #[test]
    fn full_queue_drops_the_oldest_data_but_keeps_status() {
        let mut outbox = Outbox::new(3, usize::MAX, "p/status".into());
        let online = outbox.status_message(STATUS_ONLINE);
        outbox.set_status(online);
        for n in 0..5 {
            outbox.push(data(n));
        }
        assert_eq!(payloads(&outbox), ["online", "2", "3", "4"]);
        assert_eq!(outbox.stats().dropped, 2);
        assert_eq!(outbox.stats().queued, 4);
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
    fn after_a_connack_the_retained_state_and_the_status_go_first_and_replace_waiting_copies() {
        let mut outbox = Outbox::new(10, usize::MAX, "p/status".into());
        let state = |topic: &str, n: u32| Message { topic: topic.into(), ..data(n) };
        outbox.push_state(StateClass::Config, state("ha/sensor/count/config", 7));
        outbox.push_state(StateClass::Value, state("p/cam/counts/person", 1));
        outbox.push(data(2));
        outbox.push_state(StateClass::Value, state("p/cam/counts/person", 3));
        assert_eq!(payloads(&outbox), ["7", "2", "3"], "only the newest count waits");
        assert!(outbox.waiting.iter().filter(|m| m.is_state).all(|m| m.retain));
        outbox.resync();
        assert_eq!(payloads(&outbox), ["7", "3", "online", "2"]);
        assert!(outbox.waiting[2].is_status);
        outbox.push_state(StateClass::Value, state("p/cam/counts/person", 0));
        outbox.push_state(StateClass::Config, state("ha/sensor/count/config", 8));
        outbox.connected = true;
        while outbox.hand_over_next().is_some() {}
        outbox.on_connection_lost();
        outbox.resync();
        assert_eq!(payloads(&outbox), ["8", "0", "online", "2"], "what was in flight is re-sent once");
        assert_eq!(outbox.stats().queued_bytes, data(2).bytes(), "state is not data");
        assert_eq!(outbox.states.messages().count(), 2);
    }

    /// Review M1: a deletion (the empty retained config of an entity that is gone, the count of a
    /// removed zone) was dropped by every resync, so the entity stayed in Home Assistant for good.
    #[test]
    fn a_deletion_waiting_or_in_flight_survives_reconnects_and_home_assistants_birth_until_acknowledged() {
        let mut outbox = Outbox::new(10, usize::MAX, "p/status".into());
        let state = |topic: &str, payload: &str| Message { topic: topic.into(), payload: payload.into(), ..data(0) };
        outbox.push_state(StateClass::Config, state("ha/sensor/yard/config", "{}"));
        outbox.push_state(StateClass::Value, state("p/front/zones/yard", "1"));
        outbox.push_state(StateClass::Config, state("ha/sensor/yard/config", ""));
        outbox.push_state(StateClass::Value, state("p/front/zones/yard", ""));
        outbox.push_state(StateClass::Value, state("p/front/counts/person", "2"));
        let topics = |outbox: &Outbox| -> Vec<(String, String)> {
            let sendable = sendable(outbox).into_iter();
            sendable.map(|m| (m.topic.clone(), String::from_utf8_lossy(&m.payload).into_owned())).collect()
        };
        let deletions = |outbox: &Outbox| -> Vec<String> {
            topics(outbox).into_iter().filter(|(_, payload)| payload.is_empty()).map(|(topic, _)| topic).collect()
        };
        let both = ["ha/sensor/yard/config", "p/front/zones/yard"];
        outbox.resync();
        assert_eq!(deletions(&outbox), both, "Home Assistant's birth message keeps the waiting deletions");
        outbox.connected = true;
        while outbox.hand_over_next().is_some() {}
        outbox.on_connection_lost();
        outbox.resync();
        assert_eq!(deletions(&outbox), both, "in flight when the connection dropped: sent again");
        assert_eq!(topics(&outbox).iter().filter(|(t, _)| t == "p/front/counts/person").count(), 1);
        outbox.connected = true;
        let mut pkid = 0;
        while let Some(message) = outbox.hand_over_next() {
            pkid += 1;
            outbox.on_written(pkid);
            if message.payload.is_empty() {
                outbox.on_acknowledged(pkid);
            }
        }
        outbox.on_connection_lost();
        outbox.resync();
        assert!(deletions(&outbox).is_empty(), "an acknowledged deletion is done: {:?}", topics(&outbox));
    }

    /// Review: pushing a state searched the whole queue for its older copy, on the inference
    /// worker, for every count change. Older copies are skipped instead, and dropped in one pass
    /// before they can outnumber what waits.
    #[test]
    fn a_state_that_changes_on_every_frame_during_an_outage_sends_only_its_newest_value_and_stays_bounded() {
        let mut outbox = Outbox::new(1000, usize::MAX, "p/status".into());
        let count =
            |n: usize| Message { topic: "p/front/counts/person".into(), payload: n.to_string().into(), ..data(0) };
        for n in 0..100 {
            outbox.push(data(n));
        }
        for n in 0..10_000 {
            outbox.push_state(StateClass::Value, count(n % 3));
            assert!(outbox.waiting.len() <= 100 + 1 + 2 * COMPACT_AFTER, "{} waiting", outbox.waiting.len());
        }
        outbox.push_state(StateClass::Value, count(7));
        assert_eq!(outbox.stats().queued, 101, "one count waits, whatever its copies");
        outbox.connected = true;
        let mut sent = Vec::new();
        for pkid in 1.. {
            let Some(message) = outbox.hand_over_next() else { break };
            sent.push(String::from_utf8_lossy(&message.payload).into_owned());
            outbox.on_written(pkid);
            outbox.on_acknowledged(pkid);
        }
        assert_eq!(sent.len(), 101);
        assert_eq!(sent.last().map(String::as_str), Some("7"), "only the newest count is sent");
        assert!(outbox.is_flushed());
        assert_eq!(outbox.stats().queued, 0);
    }

    #[test]
    fn a_full_queue_never_drops_the_retained_state() {
        let mut outbox = Outbox::new(2, usize::MAX, "p/status".into());
        outbox.push_state(StateClass::Value, Message { topic: "p/cam/counts/person".into(), ..data(9) });
        for n in 0..4 {
            outbox.push(data(n));
        }
        assert_eq!(payloads(&outbox), ["9", "2", "3"]);
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
}
