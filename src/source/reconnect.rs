//! Reconnect bookkeeping shared by the camera sources (V4L2 and GStreamer).
//!
//! Owns: [`Connection`] (a link that is up, or down until its next attempt: the skeleton both
//! sources run their `next_frame` on), [`DeviceError`] (what a failure means for reconnecting),
//! the backoff schedule, keeping the connection state that telemetry and `STATUS=` show
//! ([`super::status`]: connecting until the first frame of a link arrives). Must not: talk to
//! devices (the caller's `connect` does) or sleep longer than one poll interval, so that the
//! sources check their stop flag in between. (Repetitive per-frame warnings go through
//! [`crate::sys::log_limit::RateLimitedLog`].)

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::error::SourceError;
use super::frame_source::Capture;
use super::status::{SourceState, SourceStatus};

/// Why a device operation failed, sorted by what the source does about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeviceError {
    /// The device went away or hiccupped (ENOENT, ENODEV, EIO, EBUSY, timeout): close and reopen
    /// with backoff.
    #[error("{0}")]
    Transient(String),
    /// Reopening cannot help (not a V4L2 capture device, no supported format, permission denied).
    /// Ends the camera when it happens on the first open; later it is retried like a transient
    /// error, since a different device may have appeared under the same path.
    #[error("{0}")]
    Permanent(String),
}

/// A camera's link: up (`L`, an open device or a running pipeline) or down until `retry_at`, with
/// the backoff, the state telemetry shows and the log lines of every change.
pub struct Connection<L> {
    link: Link<L>,
    backoff: Backoff,
    status: SourceStatus,
    poll_interval: Duration,
    /// The camera as logs name it.
    description: String,
    /// What a retry does, for the log: "reopening", "restarting".
    retry_verb: &'static str,
}

enum Link<L> {
    Up(L),
    Down { retry_at: Instant },
}

impl<L> Connection<L> {
    /// Down, with the first attempt due now.
    pub fn new(description: String, backoff: Backoff, poll_interval: Duration, retry_verb: &'static str) -> Self {
        Connection {
            link: Link::Down { retry_at: Instant::now() },
            backoff,
            status: SourceStatus::new(SourceState::Connecting { attempt: 0 }),
            poll_interval,
            description,
            retry_verb,
        }
    }

    /// A connection whose first attempt, `connect`, is made now: only a
    /// [`DeviceError::Permanent`] failure is an error (the camera cannot work, and the source does
    /// not open); any other leaves the connection down and retrying.
    pub fn opened(
        description: String,
        backoff: Backoff,
        poll_interval: Duration,
        retry_verb: &'static str,
        connect: impl FnOnce() -> Result<L, DeviceError>,
    ) -> Result<Self, SourceError> {
        let mut connection = Connection::new(description, backoff, poll_interval, retry_verb);
        match connect() {
            Ok(link) => connection.up(link),
            Err(DeviceError::Permanent(message)) => {
                return Err(SourceError::Open { source_name: connection.description, message });
            }
            Err(error) => connection.down(&error),
        }
        Ok(connection)
    }

    /// What a camera's `next_frame` starts with: [`Capture::End`] once `stop` is set (the link is
    /// dropped for good), else [`Connection::link_or_retry`].
    pub fn next_link(
        &mut self,
        stop: &AtomicBool,
        connect: impl FnOnce() -> Result<L, DeviceError>,
    ) -> Result<&mut L, Capture> {
        if stop.load(Ordering::Relaxed) {
            self.stop();
            return Err(Capture::End);
        }
        self.link_or_retry(connect)
    }

    /// The live link; when down, waits up to one poll interval, or makes the attempt that is due,
    /// and returns [`Capture::Retry`] either way (the caller checks its stop flag before the next).
    pub fn link_or_retry(&mut self, connect: impl FnOnce() -> Result<L, DeviceError>) -> Result<&mut L, Capture> {
        if let Link::Down { retry_at } = self.link {
            let now = Instant::now();
            if now < retry_at {
                std::thread::sleep((retry_at - now).min(self.poll_interval));
            } else {
                match connect() {
                    Ok(link) => self.up(link),
                    Err(error) => self.down(&error),
                }
            }
            return Err(Capture::Retry);
        }
        match &mut self.link {
            Link::Up(link) => Ok(link),
            Link::Down { .. } => Err(Capture::Retry),
        }
    }

    /// The live link, if up.
    pub fn link(&self) -> Option<&L> {
        match &self.link {
            Link::Up(link) => Some(link),
            Link::Down { .. } => None,
        }
    }

    /// Drops the link (closing the device) and schedules the next attempt with backoff.
    pub fn down(&mut self, error: &DeviceError) {
        let delay = self.backoff.next_delay();
        self.link = Link::Down { retry_at: Instant::now() + delay };
        let attempt = self.backoff.failures();
        log::warn!(
            "{}: {error}; {} in {:.1} s (attempt {attempt})",
            self.description,
            self.retry_verb,
            delay.as_secs_f64()
        );
        self.status.set(SourceState::Reconnecting { attempt, last_error: error.to_string() });
    }

    /// Drops the link for good: the camera was asked to stop.
    pub fn stop(&mut self) {
        self.link = Link::Down { retry_at: Instant::now() };
        self.status.set(SourceState::Stopped);
    }

    /// A good frame arrived: the camera is streaming, and the next failure starts the backoff
    /// from its first step.
    pub fn frame_arrived(&mut self) {
        if !self.status.is_streaming() {
            // Only a frame proves the camera is back: an RTSP server that refuses the login
            // accepts the session first, so a link that comes up is no recovery yet.
            let failures = self.backoff.failures();
            if failures > 0 {
                log::info!("{}: streaming again after {failures} failed attempts", self.description);
            }
            self.status.set(SourceState::Streaming);
        }
        self.backoff.reset();
    }

    /// A handle telemetry can keep and read from any thread.
    pub fn status(&self) -> &SourceStatus {
        &self.status
    }

    /// The state now.
    pub fn state(&self) -> SourceState {
        self.status.get()
    }

    /// Failures since the last good frame.
    pub fn failures(&self) -> u32 {
        self.backoff.failures()
    }

    /// The link is up; the camera is `connecting` until its first frame arrives
    /// ([`Connection::frame_arrived`]): an RTSP server can accept a session and then send nothing.
    fn up(&mut self, link: L) {
        self.link = Link::Up(link);
        self.status.set(SourceState::Connecting { attempt: self.backoff.failures() });
    }
}

/// First delay after a camera goes away.
pub const INITIAL_BACKOFF: Duration = Duration::from_millis(500);
/// Longest delay between two reopen attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Doubling delay between reopen attempts, reset by a good frame.
#[derive(Debug, Clone)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    failures: u32,
}

impl Backoff {
    pub fn new(initial: Duration, max: Duration) -> Self {
        Backoff { initial, max: max.max(initial), failures: 0 }
    }

    /// Records one more failure and returns how long to wait before the next attempt:
    /// `initial`, `2·initial`, `4·initial`, … capped at `max`.
    pub fn next_delay(&mut self) -> Duration {
        let factor = 1u32.checked_shl(self.failures.min(31)).unwrap_or(u32::MAX);
        self.failures = self.failures.saturating_add(1);
        self.initial.checked_mul(factor).map_or(self.max, |delay| delay.min(self.max))
    }

    /// Failures since the last good frame (the attempt number telemetry shows).
    pub fn failures(&self) -> u32 {
        self.failures
    }

    pub fn reset(&mut self) {
        self.failures = 0;
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::new(INITIAL_BACKOFF, MAX_BACKOFF)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_half_a_second_to_thirty_and_resets() {
        let mut backoff = Backoff::default();
        let delays: Vec<f64> = (0..9).map(|_| backoff.next_delay().as_secs_f64()).collect();
        assert_eq!(delays, [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]);
        assert_eq!(backoff.failures(), 9);
        backoff.reset();
        assert_eq!(backoff.failures(), 0);
        assert_eq!(backoff.next_delay(), INITIAL_BACKOFF);
    }

    #[test]
    fn backoff_never_overflows() {
        let mut backoff = Backoff::new(Duration::from_secs(u64::MAX / 4), Duration::from_secs(u64::MAX / 2));
        for _ in 0..100 {
            assert!(backoff.next_delay() <= Duration::from_secs(u64::MAX / 2));
        }
    }

    #[test]
    fn a_link_that_is_up_is_connecting_until_its_first_frame() {
        let fresh: Connection<()> =
            Connection::new("test".into(), Backoff::default(), Duration::from_millis(1), "reopening");
        assert_eq!(fresh.state(), SourceState::Connecting { attempt: 0 });
        let mut connection =
            Connection::opened("test".into(), Backoff::default(), Duration::from_millis(1), "reopening", || Ok(()))
                .expect("opened");
        assert!(connection.status().get().is_offline(), "a session without a frame");
        connection.frame_arrived();
        assert_eq!(connection.status().get(), SourceState::Streaming);
        connection.down(&DeviceError::Transient("no frame for 20.0 s".into()));
        assert!(matches!(connection.status().get(), SourceState::Reconnecting { attempt: 1, .. }));
    }
}
