//! The fields every JSON message of the daemon starts with: its layout's version and, when the
//! daemon sent it, where it stands among the daemon's messages (its run, its sequence number, its
//! kind: `crate::service::run_id::Stamp`).
//!
//! Owns: [`Envelope`], the one definition of these four fields, their order and when they are
//! left out, which the detections, event and telemetry messages embed (`#[serde(flatten)]`). Must
//! not: know any message's other fields.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use super::run_id::Stamp;

/// `schema`, then (a stamped message) `run`, `seq` and `kind`; a message without a stamp (`detect`'s
/// output, `GET /api/status`) has `schema` alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Envelope<'a> {
    /// The message layout's version, bumped only for changes that break existing consumers.
    pub schema: u32,
    /// The daemon's run: one random id per start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<Cow<'a, str>>,
    /// The messages of this kind (of this camera) in the run so far, from 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// What `seq` counts: `detections`, `event`, `telemetry`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<Cow<'a, str>>,
}

impl<'a> Envelope<'a> {
    /// A message of layout `schema` and kind `kind`, stamped with `stamp` when the daemon sends it.
    pub fn new(schema: u32, stamp: Option<Stamp<'a>>, kind: &'static str) -> Envelope<'a> {
        Envelope {
            schema,
            run: stamp.map(|stamp| Cow::Borrowed(stamp.run)),
            seq: stamp.map(|stamp| stamp.seq),
            kind: stamp.map(|_| Cow::Borrowed(kind)),
        }
    }

    /// The same, owning its text (a message kept or parsed).
    pub fn into_owned(self) -> Envelope<'static> {
        Envelope {
            schema: self.schema,
            run: self.run.map(|run| Cow::Owned(run.into_owned())),
            seq: self.seq,
            kind: self.kind.map(|kind| Cow::Owned(kind.into_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize, Deserialize)]
    struct Message<'a> {
        #[serde(flatten)]
        envelope: Envelope<'a>,
        camera: String,
    }

    #[test]
    fn a_stamped_message_starts_with_all_four_fields_and_an_unstamped_one_with_its_schema_alone() {
        let stamp = Stamp { run: "0123456789abcdef", seq: 7 };
        let stamped = Message { envelope: Envelope::new(1, Some(stamp), "event"), camera: "front".into() };
        assert_eq!(
            serde_json::to_string(&stamped).expect("json"),
            r#"{"schema":1,"run":"0123456789abcdef","seq":7,"kind":"event","camera":"front"}"#
        );
        let plain = Message { envelope: Envelope::new(2, None, "telemetry"), camera: "front".into() };
        assert_eq!(serde_json::to_string(&plain).expect("json"), r#"{"schema":2,"camera":"front"}"#);
        let parsed: Message<'_> =
            serde_json::from_str(r#"{"schema":1,"run":"r","seq":3,"kind":"k","camera":"c"}"#).expect("parse");
        assert_eq!(parsed.envelope.into_owned(), Envelope::new(1, Some(Stamp { run: "r", seq: 3 }), "k").into_owned());
    }
}
