//! Which processed frames become a detections message (`mqtt.publish`, `mqtt.max_rate_hz`).
//!
//! Owns: the per-camera decision only. Must not: format or send messages.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use super::config::PublishMode;
use crate::detection::Detection;

#[derive(Debug, Clone)]
pub struct PublishPolicy {
    mode: PublishMode,
    min_interval: Option<Duration>,
    last_sent: Option<Instant>,
    /// Class ids in the last frame that was considered (for `on_change`).
    last_classes: Option<BTreeSet<usize>>,
}

impl PublishPolicy {
    pub fn new(mode: PublishMode, max_rate_hz: f32) -> Self {
        let min_interval = (max_rate_hz > 0.0).then(|| Duration::from_secs_f32(1.0 / max_rate_hz));
        PublishPolicy { mode, min_interval, last_sent: None, last_classes: None }
    }

    /// Same state, new settings (SIGHUP reload).
    pub fn update(&mut self, mode: PublishMode, max_rate_hz: f32) {
        let fresh = PublishPolicy::new(mode, max_rate_hz);
        self.mode = fresh.mode;
        self.min_interval = fresh.min_interval;
    }

    /// Decides for one frame at `now`, and remembers what it decided.
    pub fn should_publish(&mut self, detections: &[Detection], now: Instant) -> bool {
        let wanted = match self.mode {
            PublishMode::None => false,
            PublishMode::EveryFrame => true,
            PublishMode::Detections => !detections.is_empty(),
            PublishMode::OnChange => {
                let classes: BTreeSet<usize> = detections.iter().map(|d| d.class_id).collect();
                // A change suppressed by the rate limit must still be sent later, so the remembered
                // set only moves when a message actually goes out.
                self.last_classes.as_ref() != Some(&classes)
            }
        };
        if !wanted {
            return false;
        }
        if let (Some(interval), Some(last)) = (self.min_interval, self.last_sent) {
            if now.duration_since(last) < interval {
                return false;
            }
        }
        self.last_sent = Some(now);
        if self.mode == PublishMode::OnChange {
            self.last_classes = Some(detections.iter().map(|d| d.class_id).collect());
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detection::BoundingBox;

    fn det(class_id: usize) -> Detection {
        Detection { class_id, score: 0.9, bbox: BoundingBox { x1: 0.0, y1: 0.0, x2: 1.0, y2: 1.0 } }
    }

    #[test]
    fn detections_mode_skips_empty_frames() {
        let mut policy = PublishPolicy::new(PublishMode::Detections, 0.0);
        let now = Instant::now();
        assert!(!policy.should_publish(&[], now));
        assert!(policy.should_publish(&[det(1)], now));
        assert!(PublishPolicy::new(PublishMode::EveryFrame, 0.0).should_publish(&[], now));
    }

    #[test]
    fn none_mode_never_publishes() {
        let mut policy = PublishPolicy::new(PublishMode::None, 0.0);
        let now = Instant::now();
        assert!(!policy.should_publish(&[det(1)], now));
        assert!(!policy.should_publish(&[], now + Duration::from_secs(5)));
    }

    #[test]
    fn on_change_sends_only_changes_including_to_nothing() {
        let mut policy = PublishPolicy::new(PublishMode::OnChange, 0.0);
        let now = Instant::now();
        let sent: Vec<bool> = [vec![det(1)], vec![det(1), det(1)], vec![det(1), det(2)], vec![], vec![]]
            .iter()
            .map(|d| policy.should_publish(d, now))
            .collect();
        assert_eq!(sent, [true, false, true, true, false]);
    }

    #[test]
    fn rate_limit_holds_back_but_does_not_forget_a_change() {
        let mut policy = PublishPolicy::new(PublishMode::OnChange, 2.0);
        let start = Instant::now();
        assert!(policy.should_publish(&[det(1)], start));
        assert!(!policy.should_publish(&[det(2)], start + Duration::from_millis(100)), "rate limited");
        assert!(policy.should_publish(&[det(2)], start + Duration::from_millis(600)), "change sent once allowed");
    }
}
