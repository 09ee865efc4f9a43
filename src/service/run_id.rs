//! The daemon's run: one random id per start, and the stamp every message carries with it.
//!
//! Owns: [`Stamp`], the message kinds it goes with ([`KIND_DETECTIONS`], [`KIND_EVENT`],
//! [`KIND_TELEMETRY`]) and [`new_run_id`]. Must not: count messages (each publisher of a kind of
//! message keeps its own sequence).

/// `kind` of a detections message.
pub const KIND_DETECTIONS: &str = "detections";
/// `kind` of an event message.
pub const KIND_EVENT: &str = "event";
/// `kind` of a telemetry message.
pub const KIND_TELEMETRY: &str = "telemetry";

/// Where a message stands among the daemon's messages, so consumers can drop duplicates across
/// reconnects and restarts (QoS 1 and 2 re-send after a reconnect, and `frame` restarts at 0): `run`
/// is one random id per start of the daemon, `seq` counts the messages of one kind (a camera's
/// detections, a camera's events, telemetry) in that run from 0 without gaps. Every stamped message
/// says its `kind`: (`run`, camera, `kind`, `seq`) names a message once (telemetry has no camera);
/// a gap in `seq` is a message lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp<'a> {
    pub run: &'a str,
    pub seq: u64,
}

/// A new run id: 16 hex digits from the kernel's random source (else from the clock and the pid).
pub fn new_run_id() -> String {
    use std::io::Read;
    let mut bytes = [0u8; 8];
    let random = std::fs::File::open("/dev/urandom").and_then(|mut file| file.read_exact(&mut bytes));
    if random.is_err() {
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos() as u64;
        bytes = (nanos ^ (u64::from(std::process::id()) << 40)).to_le_bytes();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_start_gets_its_own_16_hex_digit_run_id() {
        let (a, b) = (new_run_id(), new_run_id());
        assert_eq!(a.len(), 16);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()), "{a}");
        assert_ne!(a, b, "two starts get two runs");
    }
}
