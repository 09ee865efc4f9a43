//! An outlet's figures, named by the outlet: what it reports of itself each period.
//!
//! Owns: [`OutletFigures`] (its connection, its report for telemetry's `outlets.<name>` and
//! `GET /api/status`, its metrics for `/metrics`), [`Metric`], and the figures every outlet with a
//! queue shares ([`connected`], [`queued_messages`], [`queued_bytes`], [`delivered_messages`],
//! [`dropped_messages`]: one name and one meaning whichever outlet reports them, so a dashboard shows
//! every outlet alike). An outlet's own figures (MQTT's reconnects, the recorder's clips) carry its
//! own prefix (`mqtt_`, `record_`). Must not: render anything (telemetry serialises the report,
//! `crate::http::metrics` writes the exposition text and adds the `outlet` label to every sample).

use serde::Serialize;

/// What an outlet reports of itself, read each period.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OutletFigures {
    /// For an outlet with a connection: whether it is up (the `STATUS=` line names it).
    pub connected: Option<bool>,
    /// Telemetry's `outlets.<name>` and the same in `GET /api/status`: the outlet's own layout, a
    /// documented interface (docs/src/reference/telemetry.md).
    pub report: serde_json::Value,
    /// `/metrics`: `jetson_detectd_<name>` with an `outlet` label on every sample.
    pub metrics: Vec<Metric>,
}

impl OutletFigures {
    /// `report` as the outlet's serialised figures (a value that does not serialise, which plain
    /// structs of numbers and strings never are, reports `null`).
    pub fn report_of(figures: &impl Serialize) -> serde_json::Value {
        serde_json::to_value(figures).unwrap_or_default()
    }
}

/// One metric family an outlet reports: its samples carry the outlet's name as the `outlet` label,
/// then their own labels.
#[derive(Debug, Clone, PartialEq)]
pub struct Metric {
    /// Without the `jetson_detectd_` prefix and without the unit or `_total`, which the exposition
    /// adds (`outlet_dropped_messages` becomes `jetson_detectd_outlet_dropped_messages_total`).
    pub name: &'static str,
    pub help: &'static str,
    /// A base unit (`bytes`, `seconds`), added to the name.
    pub unit: Option<&'static str>,
    pub samples: Samples,
}

/// A label of a sample besides `outlet`, and its value.
pub type Label = (&'static str, String);

/// A gauge's or a counter's samples.
#[derive(Debug, Clone, PartialEq)]
pub enum Samples {
    Gauge(Vec<(Vec<Label>, f64)>),
    Counter(Vec<(Vec<Label>, u64)>),
}

impl Metric {
    /// A gauge of one sample without labels of its own.
    pub fn gauge(name: &'static str, help: &'static str, unit: Option<&'static str>, value: f64) -> Metric {
        Metric { name, help, unit, samples: Samples::Gauge(vec![(Vec::new(), value)]) }
    }

    /// A counter of one sample without labels of its own.
    pub fn counter(name: &'static str, help: &'static str, unit: Option<&'static str>, value: u64) -> Metric {
        Metric { name, help, unit, samples: Samples::Counter(vec![(Vec::new(), value)]) }
    }

    /// A gauge of labelled samples (one per camera, say).
    pub fn gauges(
        name: &'static str,
        help: &'static str,
        unit: Option<&'static str>,
        samples: Vec<(Vec<Label>, f64)>,
    ) -> Metric {
        Metric { name, help, unit, samples: Samples::Gauge(samples) }
    }

    /// A counter of labelled samples.
    pub fn counters(
        name: &'static str,
        help: &'static str,
        unit: Option<&'static str>,
        samples: Vec<(Vec<Label>, u64)>,
    ) -> Metric {
        Metric { name, help, unit, samples: Samples::Counter(samples) }
    }
}

/// `outlet_connected`: 1 while the outlet's connection is up.
pub fn connected(up: bool) -> Metric {
    Metric::gauge("outlet_connected", "1 while the outlet's connection is up, else 0.", None, f64::from(u8::from(up)))
}

/// `outlet_queue_messages`: what waits in the outlet's queue or is in flight.
pub fn queued_messages(count: usize) -> Metric {
    Metric::gauge("outlet_queue_messages", "Messages waiting in the outlet's queue or in flight.", None, count as f64)
}

/// `outlet_queue_bytes`: the bytes of what waits.
pub fn queued_bytes(bytes: usize) -> Metric {
    Metric::gauge(
        "outlet_queue",
        "Bytes of the messages in the outlet's queue (what its queue's byte bound limits).",
        Some("bytes"),
        bytes as f64,
    )
}

/// `outlet_delivered_messages_total`: what the receiver took.
pub fn delivered_messages(count: u64) -> Metric {
    Metric::counter(
        "outlet_delivered_messages",
        "Messages the outlet's receiver took (MQTT: acknowledged or written to the broker; a webhook: \
         answered with a 2xx status).",
        None,
        count,
    )
}

/// `outlet_dropped_messages_total`: what the outlet gave up on.
pub fn dropped_messages(count: u64) -> Metric {
    Metric::counter(
        "outlet_dropped_messages",
        "Messages the outlet dropped: its queue full, too large, refused or undeliverable after its retries, \
         or left at shutdown (the log says why).",
        None,
        count,
    )
}
