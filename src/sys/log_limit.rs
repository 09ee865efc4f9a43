//! What a log line may cost when something outside the daemon decides how often it is written and
//! what it holds: a camera sending corrupt frames 30 times a second, a broker client flooding a
//! command topic, a stream full of malformed metadata.
//!
//! Owns: [`RateLimitedLog`] (at most one line per interval, with the number of occurrences it
//! swallowed in between) and [`excerpt`] (the start of an untrusted text, quoted, with its length).
//! Must not: log anything itself beyond [`RateLimitedLog::skipped`]'s one warning, or keep more
//! than a counter and a time.

use std::fmt;
use std::time::{Duration, Instant};

/// Lets a warning that could fire on every frame or message through at most once per interval,
/// with the number of occurrences it swallowed in between.
#[derive(Debug)]
pub struct RateLimitedLog {
    interval: Duration,
    last_logged: Option<Instant>,
    suppressed: u64,
}

impl RateLimitedLog {
    pub fn new(interval: Duration) -> Self {
        RateLimitedLog { interval, last_logged: None, suppressed: 0 }
    }

    /// Warns `<source>: skipped <what> (<why>); <n> more skipped since the last report` when this
    /// occurrence should be logged: the one warning of every source that drops a frame it cannot use.
    pub fn skipped(&mut self, source: &str, what: &str, why: &str) {
        if let Some(suppressed) = self.admit(Instant::now()) {
            log::warn!("{source}: skipped {what} ({why}); {suppressed} more skipped since the last report");
        }
    }

    /// `Some(suppressed_since_last)` when this occurrence should be logged, `None` to stay quiet.
    pub fn admit(&mut self, now: Instant) -> Option<u64> {
        match self.last_logged {
            Some(last) if now.saturating_duration_since(last) < self.interval => {
                self.suppressed += 1;
                None
            }
            _ => {
                self.last_logged = Some(now);
                Some(std::mem::take(&mut self.suppressed))
            }
        }
    }
}

/// The first `max_chars` characters of `text`, quoted and escaped as `{:?}` does; a longer text
/// says how many bytes it had: `"OFFFFF…" (61440 bytes)`.
pub fn excerpt(text: &str, max_chars: usize) -> Excerpt<'_> {
    Excerpt { text, max_chars }
}

/// See [`excerpt`].
#[derive(Debug, Clone, Copy)]
pub struct Excerpt<'a> {
    text: &'a str,
    max_chars: usize,
}

impl fmt::Display for Excerpt<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.text.char_indices().nth(self.max_chars) {
            None => write!(f, "{:?}", self.text),
            Some((end, _)) => write!(f, "{:?}… ({} bytes)", &self.text[..end], self.text.len()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_limited_log_counts_what_it_swallows() {
        let mut log = RateLimitedLog::new(Duration::from_secs(10));
        let start = Instant::now();
        assert_eq!(log.admit(start), Some(0));
        assert_eq!(log.admit(start + Duration::from_secs(1)), None);
        assert_eq!(log.admit(start + Duration::from_secs(2)), None);
        assert_eq!(log.admit(start + Duration::from_secs(11)), Some(2));
    }

    #[test]
    fn an_excerpt_shows_a_short_text_whole_and_a_long_one_cut_with_its_length() {
        assert_eq!(excerpt("OFF", 40).to_string(), "\"OFF\"");
        assert_eq!(excerpt("a\"b\n", 40).to_string(), "\"a\\\"b\\n\"");
        let long = "é".repeat(30_000);
        assert_eq!(excerpt(&long, 40).to_string(), format!("{:?}… (60000 bytes)", "é".repeat(40)));
        assert_eq!(excerpt(&"x".repeat(40), 40).to_string().len(), 42, "exactly the limit: whole");
    }
}
