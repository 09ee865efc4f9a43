//! A camera source's connection state as telemetry, `STATUS=` and the live view show it: streaming,
//! connecting, reconnecting (with the attempt and the last error), ended, stopped; and since when.
//!
//! Owns: [`SourceState`], [`SourceReport`] and [`SourceStatus`], the shared view the source thread
//! writes on transitions and any thread reads. Must not: decide a transition (the sources and
//! `super::reconnect` do).

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use serde::Serialize;

use crate::sys::lock::lock;

/// Connection state of a camera source, as telemetry reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum SourceState {
    /// Frames are flowing: the latest attempt delivered one.
    Streaming,
    /// The device is open or the session set up, and no frame has arrived yet; a source that gets
    /// none within its timeout reconnects.
    Connecting {
        /// Failed attempts before this one.
        attempt: u32,
    },
    /// The device went away or could not be opened; the source retries with backoff.
    Reconnecting {
        /// Failed attempts since the last good frame.
        attempt: u32,
        last_error: String,
    },
    /// A finite source (an image list played once) delivered its last frame.
    Ended,
    /// The stop flag was seen; the source delivers no more frames.
    Stopped,
}

impl SourceState {
    /// Connecting or reconnecting: the camera delivers no frames.
    pub fn is_offline(&self) -> bool {
        matches!(self, SourceState::Connecting { .. } | SourceState::Reconnecting { .. })
    }

    /// States of one kind share their `since`: streaming, offline (connecting or reconnecting),
    /// ended, stopped.
    fn kind(&self) -> u8 {
        match self {
            SourceState::Streaming => 0,
            SourceState::Connecting { .. } | SourceState::Reconnecting { .. } => 1,
            SourceState::Ended => 2,
            SourceState::Stopped => 3,
        }
    }
}

/// A source's state and since when it has been in it.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceReport {
    pub state: SourceState,
    /// When the source entered this kind of state: another connect or reconnect attempt does not
    /// move it, so a camera that stays offline shows when it went away.
    pub since: SystemTime,
}

/// A shared, cheaply cloned view of a source's [`SourceState`]: the source thread writes it on
/// transitions only, telemetry reads it from any thread.
#[derive(Debug, Clone)]
pub struct SourceStatus(Arc<Mutex<SourceReport>>);

impl SourceStatus {
    pub fn new(state: SourceState) -> Self {
        SourceStatus(Arc::new(Mutex::new(SourceReport { state, since: SystemTime::now() })))
    }

    pub fn get(&self) -> SourceState {
        self.lock().state.clone()
    }

    /// The state with the time it was entered.
    pub fn report(&self) -> SourceReport {
        self.lock().clone()
    }

    pub(crate) fn set(&self, state: SourceState) {
        let mut current = self.lock();
        if current.state.kind() != state.kind() {
            current.since = SystemTime::now();
        }
        if current.state != state {
            current.state = state;
        }
    }

    pub(crate) fn is_streaming(&self) -> bool {
        matches!(self.lock().state, SourceState::Streaming)
    }

    fn lock(&self) -> MutexGuard<'_, SourceReport> {
        // Every critical section is one read or one assignment: a poisoned value is still whole.
        lock(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn status_is_shared_between_clones() {
        let status = SourceStatus::new(SourceState::Streaming);
        let telemetry_view = status.clone();
        status.set(SourceState::Reconnecting { attempt: 2, last_error: "EIO".into() });
        assert_eq!(telemetry_view.get(), SourceState::Reconnecting { attempt: 2, last_error: "EIO".into() });
        assert!(!telemetry_view.is_streaming());
    }

    #[test]
    fn since_marks_the_first_of_a_run_of_reconnect_attempts() {
        let status = SourceStatus::new(SourceState::Streaming);
        let streaming_since = status.report().since;
        std::thread::sleep(Duration::from_millis(5));
        status.set(SourceState::Reconnecting { attempt: 1, last_error: "EIO".into() });
        let offline_since = status.report().since;
        assert!(offline_since > streaming_since, "a new kind of state moves `since`");
        std::thread::sleep(Duration::from_millis(5));
        status.set(SourceState::Reconnecting { attempt: 2, last_error: "ENODEV".into() });
        let report = status.report();
        assert_eq!(report.since, offline_since, "another attempt keeps `since`");
        assert_eq!(report.state, SourceState::Reconnecting { attempt: 2, last_error: "ENODEV".into() });
        status.set(SourceState::Connecting { attempt: 2 });
        assert_eq!(status.report().since, offline_since, "connecting without a frame is still offline");
        status.set(SourceState::Streaming);
        assert!(status.report().since > offline_since);
    }

    /// Issue 35: an RTSP server that answers OPTIONS and then stays silent was `streaming`.

    #[test]
    fn state_serialises_with_a_tag() {
        let json = serde_json::to_string(&SourceState::Reconnecting { attempt: 3, last_error: "gone".into() })
            .expect("serialise");
        assert_eq!(json, r#"{"state":"reconnecting","attempt":3,"last_error":"gone"}"#);
    }
}
