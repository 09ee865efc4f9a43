//! Which events get a clip, and which clip: one camera's decisions, made as its events happen.
//!
//! Owns: the trigger (labels, the camera's zones, the shortest event), the clip an event belongs
//! to (an event that starts while a clip still records, post-roll included, joins it: overlapping
//! events share one clip), the clip's name (chosen here, when the first event asks for it, so that
//! every message about the event can name it at once), and when the recording may stop (`post`
//! after the last of its events ended). Its output is [`Command`]s for the camera's recorder
//! thread. Must not: block, do I/O, or read a clock: every time comes from the events (capture
//! times), so the decisions are the same at any processing speed.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, SystemTime};

use super::clip::clip_name;
use crate::config::record::Recording;
use crate::track::events::EventKind;

/// Extra capture time the pre-roll holds beyond `pre_s + min_event_s`: what an event may lag
/// behind its first frame (the tracker confirms a track after `min_hits` frames, then inference
/// and the hand-over take their time).
pub const EVENT_LAG: Duration = Duration::from_secs(3);

/// What the planner is told of an event.
#[derive(Debug, Clone, Copy)]
pub struct EventFacts<'a> {
    pub kind: EventKind,
    pub track: u64,
    pub label: &'a str,
    /// The zones the object is in now.
    pub zones: &'a [String],
    /// Capture times of the first and the latest frame the object was seen on.
    pub first_seen: SystemTime,
    pub last_seen: SystemTime,
}

/// What the camera's recorder thread is asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Record a new clip named `name` (relative to the record directory) showing everything from
    /// `from` on, for event `track`.
    Start { name: String, track: u64, from: SystemTime },
    /// Another event joins the clip being recorded.
    Join { track: u64 },
    /// Keep recording until this capture time (`None`: until told otherwise, an event is open).
    Until(Option<SystemTime>),
    /// The camera lost its stream: the clip ends now with what it has, and the pre-roll is
    /// emptied (what comes after the outage must not follow what came before in one clip).
    Offline,
}

/// The clip being recorded, as the planner sees it.
#[derive(Debug)]
struct Planned {
    name: String,
    open: BTreeSet<u64>,
    until: Option<SystemTime>,
}

/// The decisions of one camera.
#[derive(Debug)]
pub struct ClipPlanner {
    camera: String,
    recording: Recording,
    current: Option<Planned>,
    /// Events that match but have not lasted `min_event` yet: their first frame's time.
    waiting: HashMap<u64, SystemTime>,
    /// The clip of each live event that has one.
    clips: HashMap<u64, String>,
    /// Live events that would have started a clip while none could be recorded: they get none.
    declined: BTreeSet<u64>,
}

impl ClipPlanner {
    pub fn new(camera: &str, recording: Recording) -> ClipPlanner {
        ClipPlanner {
            camera: camera.to_owned(),
            recording,
            current: None,
            waiting: HashMap::new(),
            clips: HashMap::new(),
            declined: BTreeSet::new(),
        }
    }

    /// How much capture time the camera's pre-roll must hold.
    pub fn preroll_span(&self) -> Duration {
        self.recording.pre + self.recording.min_event + EVENT_LAG
    }

    pub fn recording(&self) -> &Recording {
        &self.recording
    }

    /// Whether events of this label in these zones get clips.
    fn matches(&self, label: &str, zones: &[String]) -> bool {
        let label_ok = self.recording.labels.is_empty() || self.recording.labels.iter().any(|l| l == label);
        let zone_ok = self.recording.zones.is_empty() || zones.iter().any(|zone| self.recording.zones.contains(zone));
        label_ok && zone_ok
    }

    /// Takes one event; returns the clip (relative path) the event belongs to, if any, and pushes
    /// the recorder's commands to `out`. `can_record`: whether a clip could be written now (not
    /// paused, switched on, a stream is there); an event that would start or join a clip while it
    /// cannot gets none.
    pub fn event(&mut self, event: &EventFacts<'_>, can_record: bool, out: &mut Vec<Command>) -> Option<String> {
        self.expire(event.last_seen);
        let lasted = event.last_seen.duration_since(event.first_seen).unwrap_or_default();
        let long_enough = lasted >= self.recording.min_event;
        let undecided = !self.clips.contains_key(&event.track) && !self.declined.contains(&event.track);
        if undecided && self.matches(event.label, event.zones) {
            // An event ending is too late to start a clip, unless it was waiting for min_event.
            let was_waiting = self.waiting.remove(&event.track).is_some();
            if long_enough && (event.kind != EventKind::End || was_waiting) {
                self.trigger(event.track, event.first_seen, can_record, out);
            } else if !long_enough && event.kind != EventKind::End {
                self.waiting.insert(event.track, event.first_seen);
            }
        }
        let clip = self.clips.get(&event.track).cloned();
        if event.kind == EventKind::End {
            self.waiting.remove(&event.track);
            self.declined.remove(&event.track);
            self.clips.remove(&event.track);
            if let Some(current) = self.current.as_mut() {
                if current.open.remove(&event.track) && current.open.is_empty() {
                    current.until = Some(event.last_seen + self.recording.post);
                    out.push(Command::Until(current.until));
                }
            }
        }
        clip
    }

    /// A frame of the camera was processed (capture time `at`): events waiting to last
    /// `min_event` that now have get their clip.
    pub fn frame(&mut self, at: SystemTime, can_record: bool, out: &mut Vec<Command>) {
        self.expire(at);
        let due: Vec<(u64, SystemTime)> = self
            .waiting
            .iter()
            .filter(|(_, first)| at.duration_since(**first).unwrap_or_default() >= self.recording.min_event)
            .map(|(track, first)| (*track, *first))
            .collect();
        for (track, first_seen) in due {
            self.waiting.remove(&track);
            self.trigger(track, first_seen, can_record, out);
        }
    }

    /// The camera lost its stream (its events have ended): the clip being recorded ends now, and
    /// the next event starts a new one.
    pub fn offline(&mut self, out: &mut Vec<Command>) {
        self.current = None;
        self.waiting.clear();
        out.push(Command::Offline);
    }

    /// The clip event `track` belongs to, while the event lasts.
    pub fn clip_of(&self, track: u64) -> Option<&str> {
        self.clips.get(&track).map(String::as_str)
    }

    /// Forgets the current clip once the capture time `now` is past its end.
    fn expire(&mut self, now: SystemTime) {
        if self.current.as_ref().is_some_and(|current| current.until.is_some_and(|until| now > until)) {
            self.current = None;
        }
    }

    fn trigger(&mut self, track: u64, first_seen: SystemTime, can_record: bool, out: &mut Vec<Command>) {
        if !can_record {
            // Neither a new clip nor a longer one: recording is paused or switched off.
            self.declined.insert(track);
            return;
        }
        match self.current.as_mut() {
            Some(current) => {
                current.open.insert(track);
                if current.until.take().is_some() {
                    out.push(Command::Until(None));
                }
                out.push(Command::Join { track });
                self.clips.insert(track, current.name.clone());
            }
            None => {
                let from = first_seen.checked_sub(self.recording.pre).unwrap_or(first_seen);
                let name = clip_name(&self.camera, from, track);
                out.push(Command::Start { name: name.clone(), track, from });
                self.current = Some(Planned { name: name.clone(), open: BTreeSet::from([track]), until: None });
                self.clips.insert(track, name);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;
    use crate::config::record::{EncoderChoice, EncoderConfig};

    fn recording(labels: &[&str], zones: &[&str], min_event_s: u64) -> Recording {
        Recording {
            pre: Duration::from_secs(5),
            post: Duration::from_secs(5),
            labels: labels.iter().map(|l| l.to_string()).collect(),
            zones: zones.iter().map(|z| z.to_string()).collect(),
            min_event: Duration::from_secs(min_event_s),
            max_clip: Duration::from_secs(300),
            preroll_max_bytes: 1 << 20,
            encoder: EncoderConfig { kind: EncoderChoice::Auto, fps: 5.0, max_width: 1280, bitrate_kbps: 2000 },
        }
    }

    fn at(seconds: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_800_000_000 + seconds)
    }

    fn event<'a>(
        kind: EventKind,
        track: u64,
        label: &'a str,
        zones: &'a [String],
        first: u64,
        last: u64,
    ) -> EventFacts<'a> {
        EventFacts { kind, track, label, zones, first_seen: at(first), last_seen: at(last) }
    }

    #[test]
    fn an_event_starts_a_clip_from_pre_before_it_and_its_end_sets_the_post_roll() {
        let mut planner = ClipPlanner::new("gate", recording(&[], &[], 0));
        let mut out = Vec::new();
        let clip = planner.event(&event(EventKind::Start, 1, "person", &[], 100, 101), true, &mut out);
        let name = clip_name("gate", at(95), 1);
        assert_eq!(clip.as_deref(), Some(name.as_str()));
        assert_eq!(out, [Command::Start { name: name.clone(), track: 1, from: at(95) }]);
        out.clear();
        let end = planner.event(&event(EventKind::End, 1, "person", &[], 100, 110), true, &mut out);
        assert_eq!(end, Some(name), "the end names the clip");
        assert_eq!(out, [Command::Until(Some(at(115)))]);
        assert_eq!(planner.clip_of(1), None, "forgotten once ended");
    }

    #[test]
    fn an_event_that_starts_before_the_clip_ended_joins_it_and_a_later_one_gets_its_own() {
        let mut planner = ClipPlanner::new("gate", recording(&[], &[], 0));
        let mut out = Vec::new();
        let first = planner.event(&event(EventKind::Start, 1, "car", &[], 100, 100), true, &mut out);
        planner.event(&event(EventKind::End, 1, "car", &[], 100, 110), true, &mut out);
        out.clear();
        let second = planner.event(&event(EventKind::Start, 2, "car", &[], 112, 113), true, &mut out);
        assert_eq!(second, first, "within the post-roll: the same clip");
        assert_eq!(out, [Command::Until(None), Command::Join { track: 2 }]);
        planner.event(&event(EventKind::End, 2, "car", &[], 112, 120), true, &mut out);
        out.clear();
        let third = planner.event(&event(EventKind::Start, 3, "car", &[], 126, 126), true, &mut out);
        assert!(third.is_some() && third != first, "after the post-roll: a new clip");
        assert!(matches!(out.as_slice(), [Command::Start { track: 3, .. }]));
    }

    #[test]
    fn only_matching_labels_and_zones_start_clips() {
        let mut planner = ClipPlanner::new("gate", recording(&["person"], &["drive"], 0));
        let mut out = Vec::new();
        let (drive, lawn) = (vec!["drive".to_string()], vec!["lawn".to_string()]);
        assert_eq!(planner.event(&event(EventKind::Start, 1, "dog", &drive, 100, 100), true, &mut out), None);
        assert_eq!(planner.event(&event(EventKind::Start, 2, "person", &lawn, 100, 100), true, &mut out), None);
        assert!(out.is_empty());
        let walked_in = planner.event(&event(EventKind::Update, 2, "person", &drive, 100, 104), true, &mut out);
        assert!(walked_in.is_some(), "an update into the zone starts the clip");
        assert!(matches!(&out[..], [Command::Start { track: 2, from, .. }] if *from == at(95)));
    }

    #[test]
    fn a_short_event_waits_for_min_event_and_one_that_ends_sooner_gets_no_clip() {
        let mut planner = ClipPlanner::new("gate", recording(&[], &[], 2));
        let mut out = Vec::new();
        assert_eq!(planner.event(&event(EventKind::Start, 1, "cat", &[], 100, 100), true, &mut out), None);
        planner.frame(at(101), true, &mut out);
        assert!(out.is_empty());
        planner.frame(at(102), true, &mut out);
        assert!(matches!(&out[..], [Command::Start { track: 1, from, .. }] if *from == at(95)));
        out.clear();
        assert!(planner.event(&event(EventKind::End, 1, "cat", &[], 100, 103), true, &mut out).is_some());
        let mut later = ClipPlanner::new("gate", recording(&[], &[], 2));
        later.event(&event(EventKind::Start, 2, "cat", &[], 200, 200), true, &mut out);
        out.clear();
        assert_eq!(later.event(&event(EventKind::End, 2, "cat", &[], 200, 201), true, &mut out), None);
        later.frame(at(205), true, &mut out);
        assert!(out.is_empty(), "a 1 s event never gets a clip");
    }

    #[test]
    fn while_recording_is_impossible_an_event_neither_starts_nor_joins_a_clip() {
        let mut planner = ClipPlanner::new("gate", recording(&[], &[], 0));
        let mut out = Vec::new();
        assert_eq!(planner.event(&event(EventKind::Start, 1, "person", &[], 100, 100), false, &mut out), None);
        assert!(out.is_empty());
        assert_eq!(planner.event(&event(EventKind::End, 1, "person", &[], 100, 105), true, &mut out), None);
        let recording = planner.event(&event(EventKind::Start, 2, "person", &[], 200, 200), true, &mut out);
        assert!(recording.is_some());
        out.clear();
        assert_eq!(planner.event(&event(EventKind::Start, 3, "car", &[], 201, 201), false, &mut out), None);
        assert!(out.is_empty(), "the clip being written is not extended");
    }
}
