//! What arrives on the daemon's subscriptions, on its way from the connection task to the
//! [`Inbound`] queue that the MQTT outlet's task reads.
//!
//! Anyone who may publish on the broker decides what arrives here, how large and how often. The
//! daemon takes a message of any size the protocol allows (rumqttc closes the connection on a
//! packet over its bound, and a retained one would do so again at every reconnect: see
//! `super::connection`'s packet bound), and refuses here what no command, birth message or
//! discovery config needs: a payload over [`MAX_INCOMING_PAYLOAD_BYTES`].
//!
//! Owns: the hand-over's types ([`Inbound`]: the filters and the queue; [`Incoming`]: one
//! message), that size bound, handing the rest to the queue without waiting (a full queue drops the
//! message), and what the log says of both: each topic's first refusal names the topic (up to
//! [`MAX_NAMED_TOPICS`] topics), every other refusal or drop is counted in at most one line per
//! [`LOG_INTERVAL`]. Must not: read a payload's meaning (the outlet does), wait for the queue, or
//! log a payload.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::sys::log_limit::{excerpt, RateLimitedLog};

/// Largest payload taken from a subscription: a discovery config of this daemon is a few KiB, a
/// command or a birth message a few bytes.
pub const MAX_INCOMING_PAYLOAD_BYTES: usize = 64 * 1024;
/// Topics whose first refused message is logged by name; beyond them refusals are only counted.
pub const MAX_NAMED_TOPICS: usize = 64;
/// Characters of a topic a log line shows (a topic may be 64 KiB long).
pub const TOPIC_EXCERPT_CHARS: usize = 256;
/// At most one line per this for refusals after a topic's first, and for drops.
pub const LOG_INTERVAL: Duration = Duration::from_secs(10);

/// A message the broker delivered on one of the [`Inbound`] subscriptions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incoming {
    pub topic: String,
    pub payload: Vec<u8>,
    /// Sent because the daemon subscribed (the broker kept it), not because someone published it
    /// just now.
    pub retain: bool,
}

/// Messages that arrive on these topic filters (subscribed after every CONNACK, QoS 1) go to
/// `sender`; when its queue is full they are dropped and logged, never waited for. Payloads over
/// [`MAX_INCOMING_PAYLOAD_BYTES`] are refused (logged) and the connection stays
/// up.
#[derive(Debug, Clone)]
pub struct Inbound {
    pub filters: Vec<String>,
    pub sender: mpsc::Sender<Incoming>,
}

/// What happened to a message that arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivered {
    Queued,
    /// Over [`MAX_INCOMING_PAYLOAD_BYTES`].
    Refused,
    /// The queue was full (or its reader gone).
    Dropped,
}

/// The connection task's side of the [`Inbound`] queue.
#[derive(Debug)]
pub struct Delivery {
    inbound: Inbound,
    named: BTreeSet<String>,
    refused: RateLimitedLog,
    dropped: RateLimitedLog,
}

impl Delivery {
    pub fn new(inbound: Inbound) -> Delivery {
        Delivery {
            inbound,
            named: BTreeSet::new(),
            refused: RateLimitedLog::new(LOG_INTERVAL),
            dropped: RateLimitedLog::new(LOG_INTERVAL),
        }
    }

    /// The topic filters to subscribe to.
    pub fn filters(&self) -> &[String] {
        &self.inbound.filters
    }

    /// Hands a message that arrived (`retain`: sent because of a subscription, not live) to the
    /// queue, unless it is too large or the queue is full.
    pub fn deliver(&mut self, topic: &str, payload: &[u8], retain: bool, now: Instant) -> Delivered {
        if payload.len() > MAX_INCOMING_PAYLOAD_BYTES {
            self.refuse(topic, payload.len(), retain, now);
            return Delivered::Refused;
        }
        let incoming = Incoming { topic: topic.to_owned(), payload: payload.to_vec(), retain };
        match self.inbound.sender.try_send(incoming) {
            Ok(()) => Delivered::Queued,
            Err(error) => {
                if let Some(more) = self.dropped.admit(now) {
                    log::warn!(
                        "MQTT: a message on {} was dropped ({error}); {more} more dropped since the last report",
                        excerpt(topic, TOPIC_EXCERPT_CHARS)
                    );
                }
                Delivered::Dropped
            }
        }
    }

    fn refuse(&mut self, topic: &str, bytes: usize, retain: bool, now: Instant) {
        let kept = if retain { "retained " } else { "" };
        let first_on_topic = self.named.len() < MAX_NAMED_TOPICS && self.named.insert(topic.to_owned());
        if first_on_topic {
            log::warn!(
                "MQTT: refused a {kept}message of {bytes} bytes on {}: larger than the {MAX_INCOMING_PAYLOAD_BYTES} \
                 bytes any command, birth message or discovery config takes; the connection stays up",
                excerpt(topic, TOPIC_EXCERPT_CHARS)
            );
        } else if let Some(more) = self.refused.admit(now) {
            log::warn!(
                "MQTT: refused another {kept}message of {bytes} bytes on {} (over {MAX_INCOMING_PAYLOAD_BYTES} bytes); \
                 {more} more refused since the last report",
                excerpt(topic, TOPIC_EXCERPT_CHARS)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::mpsc;

    fn delivery(capacity: usize) -> (Delivery, mpsc::Receiver<Incoming>) {
        let (sender, receiver) = mpsc::channel(capacity);
        (Delivery::new(Inbound { filters: vec!["p/#".into()], sender }), receiver)
    }

    #[test]
    fn a_message_over_the_bound_is_refused_and_the_others_are_queued_with_their_retain_flag() {
        let (mut delivery, mut receiver) = delivery(4);
        let now = Instant::now();
        assert_eq!(
            delivery.deliver("p/a/set", &vec![b'x'; MAX_INCOMING_PAYLOAD_BYTES + 1], true, now),
            Delivered::Refused
        );
        assert_eq!(delivery.deliver("p/a/set", &vec![b'x'; MAX_INCOMING_PAYLOAD_BYTES], true, now), Delivered::Queued);
        assert_eq!(delivery.deliver("p/b/set", b"ON", false, now), Delivered::Queued);
        let first = receiver.try_recv().expect("queued");
        assert_eq!(
            (first.topic.as_str(), first.payload.len(), first.retain),
            ("p/a/set", MAX_INCOMING_PAYLOAD_BYTES, true)
        );
        let second = receiver.try_recv().expect("queued");
        assert_eq!((second.topic.as_str(), second.payload.as_slice(), second.retain), ("p/b/set", &b"ON"[..], false));
    }

    #[test]
    fn a_full_queue_drops_without_waiting() {
        let (mut delivery, _receiver) = delivery(1);
        let now = Instant::now();
        assert_eq!(delivery.deliver("p/a/set", b"ON", false, now), Delivered::Queued);
        assert_eq!(delivery.deliver("p/a/set", b"OFF", false, now), Delivered::Dropped);
    }

    #[test]
    fn only_a_bounded_number_of_topics_is_remembered_by_name() {
        let (mut delivery, _receiver) = delivery(1);
        let big = vec![0u8; MAX_INCOMING_PAYLOAD_BYTES + 1];
        for n in 0..MAX_NAMED_TOPICS * 4 {
            delivery.deliver(&format!("p/{n}/set"), &big, false, Instant::now());
        }
        assert_eq!(delivery.named.len(), MAX_NAMED_TOPICS);
    }
}
