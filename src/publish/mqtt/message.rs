//! One message on its way to the broker, as the publisher queues it.
//!
//! Owns: what a queued message is ([`Message`]: data, per-frame data, a retained state or the
//! status), what the queue bounds count of it, and the limits every message must meet before it is
//! queued ([`refusal`]: the payload size, a topic a broker accepts for a publish). Must not: queue,
//! send or keep anything (the outbox and the retained states do), or know what a payload means.

use rumqttc::QoS;

/// Largest payload accepted; bigger ones are dropped (and counted) instead of breaking the connection.
pub const MAX_PAYLOAD_BYTES: usize = 8 * 1024 * 1024;
/// Longest topic accepted.
pub(super) const MAX_TOPIC_BYTES: usize = 1024;

/// One message as the MQTT outlet builds it: the publisher adds the QoS.
#[derive(Debug, Clone, PartialEq)]
pub struct Outgoing {
    pub topic: String,
    pub payload: Vec<u8>,
    pub retain: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Message {
    pub(super) topic: String,
    pub(super) payload: Vec<u8>,
    pub(super) qos: QoS,
    pub(super) retain: bool,
    /// Status messages are exempt from the queue bound; only the latest waiting one is kept.
    pub(super) is_status: bool,
    /// A retained state message (`super::retained`): exempt from the queue bound too (the
    /// configuration bounds how many there are), and only the latest of each topic waits.
    pub(super) is_state: bool,
    /// Detections and snapshots: dropped before anything else when the queue is full.
    pub(super) per_frame: bool,
}

impl Message {
    /// What the byte bound counts.
    pub(super) fn bytes(&self) -> usize {
        self.payload.len() + self.topic.len()
    }

    /// Counted against the queue bounds (everything but the status and the retained state).
    pub(super) fn is_data(&self) -> bool {
        !self.is_status && !self.is_state
    }

    /// A state message with an empty payload: it deletes the topic's retained message. The
    /// retained states forget the topic at once, so only the queue holds it, until the broker
    /// acknowledged it.
    pub(super) fn is_deletion(&self) -> bool {
        self.is_state && self.payload.is_empty()
    }
}

/// Why a message for `topic` with `payload_len` bytes cannot be queued, if it cannot: a payload
/// over [`MAX_PAYLOAD_BYTES`], or a topic that is empty, longer than [`MAX_TOPIC_BYTES`] or holds a
/// wildcard or a NUL (a broker closes the connection of a client that publishes on one).
pub(super) fn refusal(topic: &str, payload_len: usize) -> Option<&'static str> {
    if payload_len > MAX_PAYLOAD_BYTES {
        Some("payload too large")
    } else if topic.is_empty() || topic.len() > MAX_TOPIC_BYTES || topic.contains(['+', '#', '\0']) {
        Some("invalid topic")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_a_broker_refuses_for_a_publish_and_oversized_payloads_are_refused() {
        assert_eq!(refusal("p/front/detections", 10), None);
        assert_eq!(refusal("p/front/detections", MAX_PAYLOAD_BYTES + 1), Some("payload too large"));
        for topic in ["", "p/+/x", "p/#", "p/\0", &"x".repeat(MAX_TOPIC_BYTES + 1)] {
            assert_eq!(refusal(topic, 0), Some("invalid topic"), "{topic:?}");
        }
    }
}
