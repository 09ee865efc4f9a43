//! One clip file: written fragment by fragment while it records, put in place when it ends, and
//! recovered after a crash or power cut.
//!
//! A clip records into `<camera>/<start>-<track>.mp4.part`; every fragment (at most
//! [`FRAGMENT`] of video, a new one at each keyframe) is written whole and `fdatasync`ed, so what
//! a power cut leaves plays up to the last second or so. Finishing appends the trailer (camera,
//! start, end, tracks), syncs, renames the file to `<start>-<track>.mp4` and syncs the directory:
//! a name without `.part` is always a whole clip. At start, [`recover`] cuts a `.part` file back
//! to its last complete fragment and finishes it the same way, or removes it when nothing of it
//! plays.
//!
//! Owns: the file's name ([`clip_name`]), its timeline (stream timestamps to 90 kHz ticks from 0,
//! a stream restart bridged by one frame), the fragment cadence (the boxes of the metadata track,
//! [`super::metadata`], go into the same fragments as the video), the trailer's text, and reading a
//! finished clip's [`ClipEntry`] back. Every write is announced first to the writer's [`Room`]
//! (with its size), so that retention can make room for it. Must not: decide when a clip starts or
//! ends (the camera's recorder does) or what goes to make room (retention does), or leave a file
//! without `.part` that is not whole.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::boxes::BoxFrame;
use super::metadata::BoxTrack;
use super::mp4::{self, Run, Sample, Track, METADATA_TRACK, TRAILER_BYTES, VIDEO_TRACK};
use super::nal::{self, NalError, ParameterSets};
use super::timeline::{raw_times, ticks_duration, to_ticks, Timeline};
use crate::source::tap::{AccessUnit, StreamFormat};

/// Longest fragment: what a power cut can lose at most (plus the keyframe interval, when a
/// fragment is cut at a keyframe only).
pub const FRAGMENT: Duration = Duration::from_secs(1);
/// The suffix of a clip that is still being written.
pub const PART_SUFFIX: &str = ".part";

#[derive(Debug, thiserror::Error)]
pub enum ClipError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{0}")]
    Stream(#[from] NalError),
    #[error("{path}: {reason}")]
    Unreadable { path: PathBuf, reason: String },
    /// The clip ended before any of its video was whole on disk: removed, never put in place.
    #[error("{path}: no fragment of video was written (removed)")]
    NoVideo { path: PathBuf },
}

impl ClipError {
    /// Whether the file system is full (recording pauses instead of failing).
    pub fn is_disk_full(&self) -> bool {
        matches!(self, ClipError::Io { source, .. } if matches!(source.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT)))
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ClipError + '_ {
    move |source| ClipError::Io { path: path.to_path_buf(), source }
}

/// A clip as the index knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClipEntry {
    pub camera: String,
    /// Relative to the record directory: `<camera>/<file>.mp4`.
    pub path: String,
    #[serde(serialize_with = "rfc3339")]
    pub start: SystemTime,
    #[serde(serialize_with = "rfc3339")]
    pub end: SystemTime,
    /// The events (track ids) it shows, the one that started it first.
    pub tracks: Vec<u64>,
    pub bytes: u64,
    /// Still being written (its file is `path` + `.part`).
    pub recording: bool,
    /// Recovered at start from a clip cut short (a crash or a power cut).
    pub recovered: bool,
}

fn rfc3339<S: serde::Serializer>(time: &SystemTime, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(&crate::sys::time::Rfc3339Millis(*time))
}

/// The trailer's text: what a finished clip says of itself.
#[derive(Debug, Serialize, Deserialize)]
struct TrailerText {
    camera: String,
    start_ms: u64,
    end_ms: u64,
    tracks: Vec<u64>,
    #[serde(default)]
    recovered: bool,
}

/// The head box's text: what recovering a clip cut short needs beyond its name.
#[derive(Debug, Serialize, Deserialize)]
struct HeadText {
    /// Capture time of the first frame (the name says when the clip was asked to start).
    start_ms: u64,
}

/// Most track ids a trailer lists (a clip of a busy street keeps its first ones).
const MAX_TRAILER_TRACKS: usize = 64;

fn unix_ms(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).unwrap_or_default().as_millis() as u64
}

fn from_unix_ms(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

/// `<camera>/<start, UTC, to the millisecond>-<track>.mp4`, e.g.
/// `gate/20261122T100000.123Z-42.mp4`: sortable, and valid on every file system (no colons).
pub fn clip_name(camera: &str, start: SystemTime, track: u64) -> String {
    let stamp: String =
        crate::sys::time::Rfc3339Millis(start).to_string().chars().filter(|c| !matches!(c, '-' | ':')).collect();
    format!("{camera}/{stamp}-{track}.mp4")
}

/// The start and first track a clip's file name (without directory) says.
pub fn parse_clip_name(file_name: &str) -> Option<(SystemTime, u64)> {
    let stem = file_name.strip_suffix(".mp4")?;
    let (stamp, track) = stem.rsplit_once('-')?;
    let track = track.parse().ok()?;
    let digits = |range: std::ops::Range<usize>| -> Option<u64> {
        let text = stamp.get(range)?;
        text.bytes().all(|b| b.is_ascii_digit()).then(|| text.parse().ok())?
    };
    if stamp.len() != 20 || stamp.get(8..9)? != "T" || stamp.get(15..16)? != "." || stamp.get(19..)? != "Z" {
        return None;
    }
    let (year, month, day) = (digits(0..4)?, digits(4..6)?, digits(6..8)?);
    let (hour, minute, second, millis) = (digits(9..11)?, digits(11..13)?, digits(13..15)?, digits(16..19)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let days = days_from_civil(year, month, day)?;
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second;
    Some((UNIX_EPOCH + Duration::from_secs(seconds) + Duration::from_millis(millis), track))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: u64, month: u64, day: u64) -> Option<u64> {
    let year = if month <= 2 { year.checked_sub(1)? } else { year };
    let era = year / 400;
    let year_of_era = year - era * 400;
    let day_of_year = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    (era * 146_097 + day_of_era).checked_sub(719_468)
}

/// A sample waiting for its fragment.
struct Pending {
    data: Vec<u8>,
    ticks: u64,
    composition_offset: i32,
    keyframe: bool,
}

/// Told the size of every write before it is made (header, fragment, trailer): retention makes
/// room for it ([`super::retention::Retention::make_room`]).
pub type Room = Box<dyn FnMut(u64) + Send>;

/// A clip being recorded.
pub struct ClipWriter {
    root: PathBuf,
    entry: ClipEntry,
    file: File,
    part: PathBuf,
    format: Arc<StreamFormat>,
    pending: Vec<Pending>,
    sequence: u32,
    timeline: Timeline,
    /// The boxes of the metadata track, placed on the video's timeline.
    boxes: BoxTrack,
    /// Bytes of complete fragments on disk.
    written: u64,
    room: Room,
}

impl ClipWriter {
    /// Creates `root/<path>.part` (`path` from [`clip_name`]) for a clip of `camera` that starts
    /// with `first` (a keyframe) for event `track`, in a stream with the parameter sets `sets`,
    /// and writes its header. `room` hears of every write before it is made.
    pub fn create(
        root: &Path,
        camera: &str,
        path: &str,
        track: u64,
        first: &AccessUnit,
        sets: &ParameterSets,
        mut room: Room,
    ) -> Result<ClipWriter, ClipError> {
        let path = path.to_owned();
        let part = root.join(format!("{path}{PART_SUFFIX}"));
        let format = first.format.clone();
        let video = Track {
            codec: format.codec,
            width: format.width,
            height: format.height,
            decoder_record: sets.decoder_record(format.codec)?,
        };
        let mut header = mp4::init_segment(&video, true);
        let head = HeadText { start_ms: unix_ms(first.captured_at) };
        header.extend(mp4::head(&serde_json::to_vec(&head).unwrap_or_default()).unwrap_or_default());
        let folder = root.join(camera);
        std::fs::create_dir_all(&folder).map_err(io(&folder))?;
        room(header.len() as u64);
        let mut file = OpenOptions::new().write(true).create_new(true).open(&part).map_err(io(&part))?;
        if let Err(source) = file.write_all(&header).and_then(|()| file.sync_data()) {
            // A header cut short (a full disk) is no clip: nothing of it would play.
            let _ = std::fs::remove_file(&part);
            return Err(ClipError::Io { path: part, source });
        }
        sync_dir(&folder).map_err(io(&folder))?;
        Ok(ClipWriter {
            root: root.to_path_buf(),
            entry: ClipEntry {
                camera: camera.to_owned(),
                path,
                start: first.captured_at,
                end: first.captured_at,
                tracks: vec![track],
                bytes: header.len() as u64,
                recording: true,
                recovered: false,
            },
            file,
            part,
            format,
            pending: Vec::new(),
            sequence: 1,
            timeline: Timeline::default(),
            boxes: BoxTrack::default(),
            written: header.len() as u64,
            room,
        })
    }

    /// The clip as the index shows it while it records.
    pub fn entry(&self) -> &ClipEntry {
        &self.entry
    }

    /// The stream format the clip was started with; a unit of another one needs a new clip.
    pub fn format(&self) -> &Arc<StreamFormat> {
        &self.format
    }

    /// Adds an event to those the clip shows.
    pub fn add_track(&mut self, track: u64) {
        if !self.entry.tracks.contains(&track) {
            self.entry.tracks.push(track);
        }
    }

    /// How much video the clip holds.
    pub fn duration(&self) -> Duration {
        self.entry.end.duration_since(self.entry.start).unwrap_or_default()
    }

    /// Appends one access unit; a fragment is written (and synced) when one is due.
    pub fn push(&mut self, unit: &AccessUnit) -> Result<(), ClipError> {
        let units = match unit.format.nal_length_size {
            None => nal::split_annex_b(&unit.data),
            Some(size) => nal::split_length_prefixed(&unit.data, size)?,
        };
        let mut data = Vec::with_capacity(unit.data.len() + 16);
        let keyframe = nal::write_sample(unit.format.codec, &units, &mut data)? || unit.keyframe;
        if data.is_empty() {
            return Ok(());
        }
        let (raw, composition_offset) = raw_times(unit);
        let ticks = self.timeline.ticks(raw);
        if let Some(first) = self.pending.first() {
            if keyframe || ticks.saturating_sub(first.ticks) >= to_ticks(FRAGMENT) {
                self.flush(ticks, None)?;
            }
        }
        self.pending.push(Pending { data, ticks, composition_offset, keyframe });
        let step = ticks_duration(u64::from(self.timeline.last_step()));
        self.boxes.unit(unit.captured_at, ticks + composition_offset as u64, step);
        // Through this unit, as long as the last step (the duration the sample gets at the end).
        self.entry.end = self.entry.start + ticks_duration(ticks + u64::from(self.timeline.last_step()));
        Ok(())
    }

    /// A processed frame's boxes: they go into the metadata track at the unit captured with them.
    pub fn push_boxes(&mut self, frame: BoxFrame) {
        self.boxes.frame(frame);
    }

    /// Writes the pending samples as one fragment, with the metadata samples whose duration is
    /// known; `next` is the decode time of the video sample after them (the last one's duration).
    /// `end`: the clip ends at these ticks, and every metadata sample goes.
    fn flush(&mut self, next: u64, end: Option<u64>) -> Result<(), ClipError> {
        let boxes = self.boxes.take(end);
        if self.pending.is_empty() && boxes.is_empty() {
            return Ok(());
        }
        let samples: Vec<Sample<'_>> = self
            .pending
            .iter()
            .enumerate()
            .map(|(i, pending)| {
                let following = self.pending.get(i + 1).map_or(next, |after| after.ticks);
                Sample {
                    data: &pending.data,
                    duration: following.saturating_sub(pending.ticks).clamp(1, u64::from(u32::MAX)) as u32,
                    composition_offset: pending.composition_offset,
                    keyframe: pending.keyframe,
                }
            })
            .collect();
        let metadata: Vec<Sample<'_>> = boxes
            .iter()
            .map(|sample| Sample {
                data: &sample.data,
                duration: sample.duration,
                composition_offset: 0,
                keyframe: true,
            })
            .collect();
        let runs = [
            Run {
                track: VIDEO_TRACK,
                decode_time: self.pending.first().map_or(0, |first| first.ticks),
                samples: &samples,
            },
            Run {
                track: METADATA_TRACK,
                decode_time: boxes.first().map_or(0, |first| first.ticks),
                samples: &metadata,
            },
        ];
        let bytes = mp4::fragment_of(self.sequence, &runs);
        (self.room)(bytes.len() as u64);
        let result = self.file.write_all(&bytes).and_then(|()| self.file.sync_data());
        if let Err(source) = result {
            // Cut back to the last whole fragment so that the file stays playable.
            let _ = self.file.set_len(self.written);
            let _ = self.file.seek(SeekFrom::Start(self.written));
            self.pending.clear();
            return Err(ClipError::Io { path: self.part.clone(), source });
        }
        self.written += bytes.len() as u64;
        self.entry.bytes = self.written;
        self.sequence += 1;
        self.pending.clear();
        Ok(())
    }

    /// Writes what is pending, the trailer, and puts the clip in place under its final name.
    /// After a write error the clip keeps what was written before it (its last whole fragment); a
    /// clip without one (a disk that filled right after its header) is removed instead: a
    /// "finished" clip with no video must never be listed.
    pub fn finish(mut self) -> Result<ClipEntry, ClipError> {
        let last = self.pending.last().map(|pending| pending.ticks + u64::from(self.timeline.last_step()));
        let end = last.unwrap_or_else(|| to_ticks(self.duration()));
        let flushed = self.flush(last.unwrap_or(end), Some(end));
        if self.sequence == 1 {
            let _ = std::fs::remove_file(&self.part);
            return Err(flushed.err().unwrap_or(ClipError::NoVideo { path: self.part.clone() }));
        }
        (self.room)(TRAILER_BYTES as u64);
        let placed = put_in_place(&mut self.file, &self.part, &self.root, &mut self.entry, self.written);
        flushed.and(placed)
    }
}

/// Appends the trailer to the clip `file` (`written` bytes of it whole), renames it from `part`
/// to its final name and syncs the directory.
fn put_in_place(
    file: &mut File,
    part: &Path,
    root: &Path,
    entry: &mut ClipEntry,
    written: u64,
) -> Result<ClipEntry, ClipError> {
    entry.tracks.truncate(MAX_TRAILER_TRACKS);
    let text = TrailerText {
        camera: entry.camera.clone(),
        start_ms: unix_ms(entry.start),
        end_ms: unix_ms(entry.end),
        tracks: entry.tracks.clone(),
        recovered: entry.recovered,
    };
    let json = serde_json::to_vec(&text).unwrap_or_default();
    let trailer = mp4::trailer(&json).unwrap_or_default();
    // A trailer that cannot be written (a full disk) is not needed: the clip is read back by
    // scanning its fragments instead.
    entry.bytes = written;
    if file.write_all(&trailer).and_then(|()| file.sync_data()).is_err() {
        let _ = file.set_len(written);
    } else {
        entry.bytes += trailer.len() as u64;
    }
    let target = root.join(&entry.path);
    std::fs::rename(part, &target).map_err(io(part))?;
    if let Some(folder) = target.parent() {
        sync_dir(folder).map_err(io(folder))?;
    }
    entry.recording = false;
    Ok(entry.clone())
}

/// Makes a rename or a new file in `dir` survive a power cut.
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Recovers `root/<camera>/<name>.mp4.part`, left by a crash or a power cut: cut back to its last
/// complete fragment and finished (trailer, final name); removed when no fragment of it is whole.
pub fn recover(root: &Path, camera: &str, part_name: &str) -> Result<Option<ClipEntry>, ClipError> {
    let part = root.join(camera).join(part_name);
    let name = part_name.strip_suffix(PART_SUFFIX).unwrap_or(part_name);
    let unreadable = |reason: String| ClipError::Unreadable { path: part.clone(), reason };
    let (named, track) = parse_clip_name(name).ok_or_else(|| unreadable("not a clip's name".into()))?;
    let mut file = OpenOptions::new().read(true).write(true).open(&part).map_err(io(&part))?;
    let len = file.metadata().map_err(io(&part))?.len();
    let scan = mp4::scan(&mut file, len);
    let scan = match scan {
        Ok(scan) if scan.fragments > 0 => scan,
        _ => {
            std::fs::remove_file(&part).map_err(io(&part))?;
            return Ok(None);
        }
    };
    let start = scan
        .head
        .as_deref()
        .and_then(|text| serde_json::from_slice::<HeadText>(text).ok())
        .map_or(named, |head| from_unix_ms(head.start_ms));
    file.set_len(scan.complete_len).map_err(io(&part))?;
    file.seek(SeekFrom::Start(scan.complete_len)).map_err(io(&part))?;
    let mut entry = ClipEntry {
        camera: camera.to_owned(),
        path: format!("{camera}/{name}"),
        start,
        end: start + scan.duration(),
        tracks: vec![track],
        bytes: scan.complete_len,
        recording: true,
        recovered: true,
    };
    put_in_place(&mut file, &part, root, &mut entry, scan.complete_len).map(Some)
}

/// The index entry of the finished clip `root/<camera>/<file_name>`: from its trailer, else (a
/// clip whose trailer could not be written) from its name and fragments.
pub fn read_entry(root: &Path, camera: &str, file_name: &str) -> Result<ClipEntry, ClipError> {
    let path = root.join(camera).join(file_name);
    let unreadable = |reason: String| ClipError::Unreadable { path: path.clone(), reason };
    let (named, track) = parse_clip_name(file_name).ok_or_else(|| unreadable("not a clip's name".into()))?;
    let mut file = File::open(&path).map_err(io(&path))?;
    let bytes = file.metadata().map_err(io(&path))?.len();
    let entry = |start: SystemTime, end: SystemTime, tracks: Vec<u64>, recovered: bool| ClipEntry {
        camera: camera.to_owned(),
        path: format!("{camera}/{file_name}"),
        start,
        end,
        tracks,
        bytes,
        recording: false,
        recovered,
    };
    if bytes >= TRAILER_BYTES as u64 {
        let mut tail = vec![0; TRAILER_BYTES];
        file.seek(SeekFrom::End(-(TRAILER_BYTES as i64)))
            .and_then(|_| file.read_exact(&mut tail))
            .map_err(io(&path))?;
        if let Some(text) = mp4::trailer_text(&tail).and_then(|text| serde_json::from_slice::<TrailerText>(text).ok()) {
            let tracks = if text.tracks.is_empty() { vec![track] } else { text.tracks };
            let start = from_unix_ms(text.start_ms);
            return Ok(entry(start, from_unix_ms(text.end_ms).max(start), tracks, text.recovered));
        }
    }
    let scan = mp4::scan(&mut file, bytes).map_err(|e| unreadable(e.to_string()))?;
    let start = scan.head.as_deref().and_then(|text| serde_json::from_slice::<HeadText>(text).ok());
    let start = start.map_or(named, |head| from_unix_ms(head.start_ms));
    Ok(entry(start, start + scan.duration(), vec![track], false))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::test_stream::{format, sets, unit};

    fn start() -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(1_795_000_000_123)
    }

    fn no_room() -> Room {
        Box::new(|_| {})
    }

    /// Camera `gate`'s clip of `track` in `dir`, begun at [`start`] with unit 0 of `format`.
    fn begin(dir: &Path, format: &Arc<StreamFormat>, track: u64, room: Room) -> ClipWriter {
        let name = clip_name("gate", start(), track);
        ClipWriter::create(dir, "gate", &name, track, &unit(format, start(), 0), &sets(), room).expect("create")
    }

    #[test]
    fn every_write_is_announced_with_its_size_before_it_is_made() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = format();
        let name = clip_name("gate", start(), 7);
        let part = dir.path().join(format!("{name}{PART_SUFFIX}"));
        // Each announcement, with the clip's size on disk when it came.
        let heard = Arc::new(std::sync::Mutex::new(Vec::new()));
        let room: Room = {
            let (heard, part) = (heard.clone(), part.clone());
            Box::new(move |bytes| {
                let on_disk = std::fs::metadata(&part).map_or(0, |m| m.len());
                heard.lock().expect("lock").push((bytes, on_disk));
            })
        };
        let mut writer = begin(dir.path(), &f, 7, room);
        for n in 0..25 {
            writer.push(&unit(&f, start(), n)).expect("push");
        }
        let entry = writer.finish().expect("finish");
        let heard = heard.lock().expect("lock").clone();
        assert_eq!(heard.len(), 5, "the header, three fragments and the trailer: {heard:?}");
        let mut announced = 0;
        for (bytes, on_disk) in heard {
            assert_eq!(on_disk, announced, "announced before the write");
            announced += bytes;
        }
        assert_eq!(announced, entry.bytes, "every byte of the clip was announced");
    }

    #[test]
    fn names_carry_the_start_and_track_and_parse_back() {
        let name = clip_name("gate", start(), 42);
        assert_eq!(name, "gate/20261118T110640.123Z-42.mp4");
        let file = name.strip_prefix("gate/").expect("camera folder");
        assert_eq!(parse_clip_name(file), Some((start(), 42)));
        for bad in ["x.mp4", "20261018T081320.123Z.mp4", "20261318T081320.123Z-1.mp4", "20261018T081320.123Z-1.mkv"] {
            assert_eq!(parse_clip_name(bad), None, "{bad}");
        }
    }

    /// Issue 49: a disk that filled right after a clip's header left a 1.9 KB "finished" clip with
    /// no video, listed. A clip without a whole fragment is removed, never put in place.
    #[test]
    fn a_clip_without_a_whole_fragment_is_removed_not_put_in_place() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = format();
        let name = clip_name("gate", start(), 7);
        let writer = begin(dir.path(), &f, 7, no_room());
        assert!(dir.path().join(format!("{name}{PART_SUFFIX}")).exists(), "its header is on disk");
        assert!(matches!(writer.finish(), Err(ClipError::NoVideo { .. })));
        assert!(!dir.path().join(&name).exists() && !dir.path().join(format!("{name}{PART_SUFFIX}")).exists());
    }

    #[test]
    fn a_finished_clip_is_in_place_with_its_trailer_and_reads_back_the_same() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = format();
        let mut writer = begin(dir.path(), &f, 7, no_room());
        for n in 0..25 {
            writer.push(&unit(&f, start(), n)).expect("push");
        }
        writer.add_track(9);
        assert!(dir.path().join(format!("{}{PART_SUFFIX}", writer.entry().path)).exists());
        let entry = writer.finish().expect("finish");
        assert_eq!(entry.end.duration_since(entry.start).expect("ordered"), Duration::from_millis(2500));
        assert_eq!(entry.tracks, [7, 9]);
        assert!(!entry.recording);
        let file = dir.path().join(&entry.path);
        assert_eq!(std::fs::metadata(&file).expect("in place").len(), entry.bytes);
        let name = entry.path.strip_prefix("gate/").expect("folder");
        assert_eq!(read_entry(dir.path(), "gate", name).expect("read back"), entry);
        let scan = mp4::scan(&mut File::open(&file).expect("open"), entry.bytes).expect("scan");
        assert_eq!(scan.fragments, 3, "a fragment per keyframe interval");
        assert_eq!(scan.duration(), Duration::from_millis(2500));
        assert!(scan.has_trailer);
    }

    #[test]
    fn a_clips_boxes_are_in_its_metadata_track_at_their_units_presentation_times() {
        use crate::record::boxes::FrameBox;
        let dir = tempfile::tempdir().expect("tempdir");
        let f = format();
        let name = clip_name("gate", start(), 7);
        let mut writer = begin(dir.path(), &f, 7, no_room());
        for n in 0..25 {
            writer.push(&unit(&f, start(), n)).expect("push");
            if n % 2 == 0 && n < 24 {
                let x = n as f32 / 100.0;
                let bbox = FrameBox {
                    label: "person".into(),
                    score: 0.8,
                    track: Some(7),
                    zones: vec![],
                    bbox: [x, 0.0, 0.5, 0.5],
                };
                writer.push_boxes(BoxFrame { captured_at: unit(&f, start(), n).captured_at, boxes: vec![bbox] });
            }
        }
        let entry = writer.finish().expect("finish");
        let file = dir.path().join(&entry.path);
        let (samples, _) =
            mp4::track_samples(&mut File::open(&file).expect("open"), entry.bytes, METADATA_TRACK, 1 << 20)
                .expect("the metadata track");
        let times: Vec<(u64, u32)> = samples.iter().map(|sample| (sample.decode_time, sample.duration)).collect();
        let mut expected: Vec<(u64, u32)> = (0..11).map(|n| (n * 18_000, 18_000)).collect();
        expected.push((198_000, 27_000));
        assert_eq!(times, expected, "every other unit's presentation time, the last one until the clip's end");
        let first = BoxFrame::parse_sample(&samples[3].data).expect("boxes");
        assert_eq!(first[0].bbox[0], 0.06, "unit 6's boxes");
        assert_eq!(read_entry(dir.path(), "gate", name.strip_prefix("gate/").expect("folder")).expect("read"), entry);
    }

    #[test]
    fn a_part_file_cut_mid_fragment_is_recovered_to_its_last_whole_fragment() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = format();
        let mut writer = begin(dir.path(), &f, 3, no_room());
        for n in 0..31 {
            writer.push(&unit(&f, start(), n)).expect("push");
        }
        let part = dir.path().join(format!("{}{PART_SUFFIX}", writer.entry().path));
        // A crash: the writer is gone without finishing, and the last fragment is half on disk.
        drop(writer);
        let len = std::fs::metadata(&part).expect("part").len();
        let file = OpenOptions::new().append(true).open(&part).expect("open");
        (&file)
            .write_all(
                &mp4::fragment(4, 0, &[Sample { data: &[0; 50], duration: 1, composition_offset: 0, keyframe: true }])
                    [..40],
            )
            .expect("write");
        let name = part.file_name().and_then(|n| n.to_str()).expect("name").to_owned();
        let entry = recover(dir.path(), "gate", &name).expect("recover").expect("something plays");
        assert!(entry.recovered && !part.exists());
        assert_eq!(entry.end.duration_since(entry.start).expect("ordered"), Duration::from_secs(3));
        assert_eq!(entry.bytes, len + TRAILER_BYTES as u64);
        let file_name = entry.path.strip_prefix("gate/").expect("folder");
        assert_eq!(read_entry(dir.path(), "gate", file_name).expect("read back"), entry);
    }

    #[test]
    fn a_part_file_cut_at_any_byte_is_recovered_to_a_prefix_whose_decode_times_strictly_increase() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = format();
        let name = clip_name("gate", start(), 3);
        let mut writer = begin(dir.path(), &f, 3, no_room());
        for n in 0..36 {
            writer.push(&unit(&f, start(), n)).expect("push");
        }
        let part = dir.path().join(format!("{name}{PART_SUFFIX}"));
        drop(writer);
        let whole = std::fs::read(&part).expect("the part file");
        let part_name = part.file_name().and_then(|n| n.to_str()).expect("name").to_owned();
        let mut recovered_fragments = Vec::new();
        for cut in 0..=whole.len() {
            std::fs::write(&part, &whole[..cut]).expect("write the cut file");
            let Some(entry) = recover(dir.path(), "gate", &part_name).expect("recover") else {
                assert!(!part.exists(), "cut at {cut}: removed");
                continue;
            };
            let file = std::fs::read(dir.path().join(&entry.path)).expect("recovered in place");
            std::fs::remove_file(dir.path().join(&entry.path)).expect("remove");
            let body = &file[..file.len() - TRAILER_BYTES];
            assert!(whole.starts_with(body), "cut at {cut}: the recovered clip is a prefix of what was written");
            assert_eq!(entry.bytes, file.len() as u64, "cut at {cut}");
            let fragments = mp4::sample_times(&file);
            let sequences: Vec<u32> = fragments.iter().map(|(sequence, _)| *sequence).collect();
            assert_eq!(sequences, (1..=fragments.len() as u32).collect::<Vec<_>>(), "cut at {cut}: each fragment once");
            let times: Vec<u64> = fragments.into_iter().flat_map(|(_, times)| times).collect();
            assert!(times.windows(2).all(|pair| pair[0] < pair[1]), "cut at {cut}: decode times {times:?}");
            assert_eq!(times.first(), Some(&0), "cut at {cut}");
            recovered_fragments.push(sequences.len());
        }
        assert_eq!(recovered_fragments.iter().max(), Some(&3), "the cut after the last fragment keeps 3");
        assert!(recovered_fragments.windows(2).all(|pair| pair[0] <= pair[1]), "more bytes, never fewer fragments");
    }

    #[test]
    fn a_part_file_without_a_whole_fragment_is_removed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = format();
        let writer = begin(dir.path(), &f, 3, no_room());
        let part = dir.path().join(format!("{}{PART_SUFFIX}", writer.entry().path));
        drop(writer);
        let name = part.file_name().and_then(|n| n.to_str()).expect("name").to_owned();
        assert_eq!(recover(dir.path(), "gate", &name).expect("recover"), None);
        assert!(!part.exists());
    }
}
