//! The one-line summary systemd shows as the service's `STATUS=`.
//!
//! Owns: [`status_line`]: totals, each outlet connection's state and each camera's state in one
//! line, errors cut short (telemetry has all of them). Must not: send it (the daemon's loop notifies systemd).

use std::time::{Duration, SystemTime};

use super::camera_stats::CameraSnapshot;
use crate::source::SourceState;

/// Longest error text `STATUS=` shows of a reconnecting camera (telemetry has all of it).
const STATUS_ERROR_CHARS: usize = 80;

/// One-line summary for systemd's `STATUS=`: totals and the state of each outlet that has a
/// connection (`connections`: its name, and whether it is up), then each camera's state:
/// `2 cameras, 14.8 fps, 3 dropped, mqtt connected; front: 14.8 fps; gate: reconnecting for 2 min
/// 5 s, attempt 5: Could not read from resource. (rtspsrc0: …)`.
pub fn status_line(cameras: &[CameraSnapshot], connections: &[(&str, bool)]) -> String {
    status_line_at(cameras, connections, SystemTime::now())
}

/// [`status_line`] as seen at `now` (for the "for …" of a camera's state).
pub fn status_line_at(cameras: &[CameraSnapshot], connections: &[(&str, bool)], now: SystemTime) -> String {
    let total_fps: f64 = cameras.iter().map(|c| c.fps).sum();
    let dropped: u64 = cameras.iter().map(|c| c.dropped).sum();
    let mut line = format!(
        "{} camera{}, {:.1} fps, {} dropped",
        cameras.len(),
        if cameras.len() == 1 { "" } else { "s" },
        total_fps,
        dropped,
    );
    for (outlet, up) in connections {
        line.push_str(&format!(", {outlet} {}", if *up { "connected" } else { "disconnected" }));
    }
    for camera in cameras {
        line.push_str("; ");
        line.push_str(&camera.name);
        line.push_str(": ");
        let state = camera.source.as_ref().map(|report| (&report.state, report.since));
        match state {
            None | Some((SourceState::Streaming, _)) => line.push_str(&format!("{:.1} fps", camera.fps)),
            Some((SourceState::Reconnecting { attempt, last_error }, since)) => {
                let offline_for = now.duration_since(since).unwrap_or_default();
                line.push_str(&format!(
                    "reconnecting for {}, attempt {attempt}: {}",
                    human_duration(offline_for),
                    shortened(last_error, STATUS_ERROR_CHARS)
                ));
            }
            Some((SourceState::Connecting { attempt }, since)) => {
                let offline_for = now.duration_since(since).unwrap_or_default();
                line.push_str(&format!("connecting for {}, no frame yet", human_duration(offline_for)));
                if *attempt > 0 {
                    line.push_str(&format!(" (attempt {})", attempt + 1));
                }
            }
            Some((SourceState::Ended, _)) => line.push_str("ended"),
            Some((SourceState::Stopped, _)) => line.push_str("stopped"),
        }
    }
    line
}

/// `42 s`, `2 min 5 s`, `3 h 12 min`.
fn human_duration(duration: Duration) -> String {
    let secs = duration.as_secs();
    match secs {
        0..60 => format!("{secs} s"),
        60..3600 => format!("{} min {} s", secs / 60, secs % 60),
        _ => format!("{} h {} min", secs / 3600, secs / 60 % 60),
    }
}

/// `text` cut to at most `max` characters, with `…` where it was cut.
fn shortened(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::SourceReport;

    fn camera(name: &str, fps: f64) -> CameraSnapshot {
        CameraSnapshot::for_tests(name, fps)
    }

    #[test]
    fn status_line_summarises_cameras_and_each_outlet_connection() {
        let line = status_line(&[camera("front", 15.0), camera("back", 14.5)], &[("mqtt", true)]);
        assert_eq!(line, "2 cameras, 29.5 fps, 4 dropped, mqtt connected; front: 15.0 fps; back: 14.5 fps");
        let two = status_line(&[camera("front", 15.0)], &[("mqtt", false), ("kafka", true)]);
        assert_eq!(two, "1 camera, 15.0 fps, 2 dropped, mqtt disconnected, kafka connected; front: 15.0 fps");
        let alone = status_line(&[camera("front", 15.0)], &[]);
        assert_eq!(alone, "1 camera, 15.0 fps, 2 dropped; front: 15.0 fps", "without an outlet that connects");
    }

    #[test]
    fn status_line_names_an_offline_camera_with_its_state() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_341_600);
        let report = |state| SourceReport { state, since: now - Duration::from_secs(125) };
        let error_start = "Could not read from resource. (rtspsrc0: ";
        let long_error = format!("{error_start}{})", "x".repeat(200));
        let cameras = [
            camera("front", 14.8).with_source(report(SourceState::Streaming)),
            camera("gate", 0.0).with_source(report(SourceState::Reconnecting { attempt: 5, last_error: long_error })),
            camera("door", 0.0).with_source(report(SourceState::Ended)),
        ];
        let line = status_line_at(&cameras, &[("mqtt", false)], now);
        let expected_error = format!("{error_start}{}…", "x".repeat(STATUS_ERROR_CHARS - error_start.len()));
        assert_eq!(
            line,
            format!(
                "3 cameras, 14.8 fps, 6 dropped, mqtt disconnected; front: 14.8 fps; \
                 gate: reconnecting for 2 min 5 s, attempt 5: {expected_error}; door: ended"
            )
        );
    }

    #[test]
    fn durations_read_as_people_say_them() {
        assert_eq!(human_duration(Duration::from_secs(42)), "42 s");
        assert_eq!(human_duration(Duration::from_secs(125)), "2 min 5 s");
        assert_eq!(human_duration(Duration::from_secs(3 * 3600 + 12 * 60 + 9)), "3 h 12 min");
    }
}
