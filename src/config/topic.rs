//! Names as MQTT topic levels: which names may be one as they are, how a label becomes one, and
//! the suffix that tells this machine's client id apart.

use std::path::Path;

/// 8 hex digits that tell this machine apart: a hash of `/etc/machine-id` and, on a Jetson, the
/// module's serial number (`/proc/device-tree/serial-number`), which a cloned SD card does not
/// copy. `None` when neither exists under `root`.
pub fn machine_suffix(root: &Path) -> Option<String> {
    use sha2::{Digest, Sha256};
    let read = |path: &str| std::fs::read(root.join(path)).ok().filter(|bytes| !bytes.is_empty());
    let (machine_id, serial) = (read("etc/machine-id"), read("proc/device-tree/serial-number"));
    if machine_id.is_none() && serial.is_none() {
        return None;
    }
    let mut hash = Sha256::new();
    hash.update(machine_id.unwrap_or_default());
    hash.update([0]);
    hash.update(serial.unwrap_or_default());
    Some(hash.finalize().iter().take(4).map(|b| format!("{b:02x}")).collect())
}

/// A name usable as one topic level as it is (cameras, zones, lines): 1..=64 letters, digits, `_`
/// or `-`.
pub fn is_topic_segment(s: &str) -> bool {
    (1..=64).contains(&s.len()) && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// A label as one topic level: letters, digits, `-` and `_` kept (lower-cased), anything else `_`
/// (`traffic light` → `traffic_light`), so no label can add a level or a wildcard.
pub fn topic_segment(label: &str) -> String {
    label.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c.to_ascii_lowercase() } else { '_' }).collect()
}
