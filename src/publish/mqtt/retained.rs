//! Retained state: the latest message of every topic that says how things are *now* — Home
//! Assistant discovery configs, counts and occupancy, control states, telemetry — kept so that it
//! can be said again whenever a subscriber may have lost it.
//!
//! Owns: one message per state topic (the newest; an empty payload deletes the entry, as it
//! deletes the retained message), in two classes sent in order: [`StateClass::Config`] (what
//! entities exist) before [`StateClass::Value`] (what they read). Must not: queue or send (the
//! outbox re-queues these after every CONNACK and when Home Assistant announces itself), or hold
//! anything per frame: its size is bounded by the configuration (cameras, labels, zones), not by
//! time.
//!
//! Why: a broker that restarts without persistence forgets every retained message, and Home
//! Assistant (re)subscribing then finds no discovery and no values: its entities stay
//! `unavailable` or `unknown` while the daemon runs. Re-asserting the state after every connection
//! and on Home Assistant's birth message brings them back within one round trip.

use std::collections::BTreeMap;

use super::message::Message;

/// Which group a state message belongs to; configs are re-sent before values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum StateClass {
    /// Describes an entity (a discovery config): sent first, so that the entity exists when its
    /// value arrives.
    Config,
    /// An entity's value (a count, a switch state, telemetry).
    Value,
}

/// The newest message of every state topic.
#[derive(Debug, Default)]
pub(super) struct RetainedStates {
    entries: BTreeMap<(StateClass, String), Message>,
}

impl RetainedStates {
    /// Keeps `message` as its topic's state; an empty payload forgets the topic.
    pub(super) fn set(&mut self, class: StateClass, message: &Message) {
        let key = (class, message.topic.clone());
        if message.payload.is_empty() {
            self.entries.remove(&key);
        } else {
            self.entries.insert(key, message.clone());
        }
    }

    /// Every state message: configs first, then values.
    pub(super) fn messages(&self) -> impl Iterator<Item = &Message> {
        self.entries.values()
    }
}

#[cfg(test)]
mod tests {
    use rumqttc::QoS;

    use super::*;

    fn state(topic: &str, payload: &str) -> Message {
        Message {
            topic: topic.into(),
            payload: payload.as_bytes().to_vec(),
            qos: QoS::AtLeastOnce,
            retain: true,
            is_status: false,
            is_state: true,
            per_frame: false,
        }
    }

    #[test]
    fn the_newest_value_of_each_topic_is_kept_configs_first_and_empty_forgets() {
        let mut states = RetainedStates::default();
        states.set(StateClass::Value, &state("p/front/counts/person", "1"));
        states.set(StateClass::Config, &state("homeassistant/sensor/x/config", "{}"));
        states.set(StateClass::Value, &state("p/front/counts/person", "2"));
        states.set(StateClass::Value, &state("p/front/zones/yard", "1"));
        let sent: Vec<(&str, &[u8])> = states.messages().map(|m| (m.topic.as_str(), &m.payload[..])).collect();
        assert_eq!(
            sent,
            [
                ("homeassistant/sensor/x/config", &b"{}"[..]),
                ("p/front/counts/person", b"2"),
                ("p/front/zones/yard", b"1")
            ]
        );
        states.set(StateClass::Value, &state("p/front/zones/yard", ""));
        states.set(StateClass::Config, &state("homeassistant/sensor/x/config", ""));
        assert_eq!(states.messages().count(), 1);
    }
}
