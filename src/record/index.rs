//! The one index of clips: camera, events, start, end, path and bytes of every clip in the record
//! directory, rebuilt from the directory at start and kept current while the daemon records.
//!
//! Owns: [`ClipIndex`] (what the HTTP stage lists and serves, what retention judges), the rebuild
//! (each camera folder's finished clips read back, clips cut short recovered or removed), and the
//! choice of what retention removes: the oldest finished clips while the total is over the byte
//! budget, and every finished clip older than the age limit. Must not: remove a clip that is
//! still recording, touch files other than `<camera>/<clip>.mp4[.part]`, or hold its lock across
//! I/O.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use super::clip::{self, ClipEntry, PART_SUFFIX};
use crate::sys::lock::lock;

/// What the rebuild found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Rebuilt {
    pub clips: usize,
    /// Clips cut short (a crash, a power cut) and finished up to their last whole fragment.
    pub recovered: usize,
    /// Clips cut short before their first fragment was whole: removed.
    pub removed: usize,
    /// Files that look like clips but could not be read (named in the log).
    pub unreadable: usize,
}

/// Why [`ClipIndex::take_finished`] left a clip where it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotTaken {
    /// The index does not know it (never recorded, or retention removed it).
    Unknown,
    /// It is being written.
    Recording,
}

/// Every clip, by path.
#[derive(Debug, Default)]
pub struct ClipIndex {
    clips: Mutex<BTreeMap<String, ClipEntry>>,
}

impl ClipIndex {
    /// Reads back every clip under `root` (one folder per camera; folders whose name is not a
    /// camera name are left alone) and recovers or removes those cut short. `ours`: the camera
    /// folders this process holds ([`super::dir::FolderLock`]); a folder another process holds is
    /// left alone whole, its `.part` files being written.
    pub fn rebuild(root: &Path, ours: &[&str]) -> (ClipIndex, Rebuilt) {
        let index = ClipIndex::default();
        let mut report = Rebuilt::default();
        let Ok(folders) = std::fs::read_dir(root) else { return (index, report) };
        for folder in folders.flatten() {
            let Some(camera) = folder.file_name().to_str().map(str::to_owned) else { continue };
            if !folder.file_type().is_ok_and(|t| t.is_dir()) || !crate::config::is_topic_segment(&camera) {
                continue;
            }
            if !ours.contains(&camera.as_str()) && super::dir::held_elsewhere(&folder.path()) {
                // Another daemon records into it: its `.part` files are being written.
                log::info!("record: {camera}/ is another process's (it holds its lock): left alone");
                continue;
            }
            let Ok(files) = std::fs::read_dir(folder.path()) else { continue };
            for file in files.flatten() {
                let Some(name) = file.file_name().to_str().map(str::to_owned) else { continue };
                if !file.file_type().is_ok_and(|t| t.is_file()) {
                    continue;
                }
                let result = if name.ends_with(PART_SUFFIX) {
                    clip::recover(root, &camera, &name).inspect(|entry| match entry {
                        Some(entry) => {
                            log::warn!("record: {} was cut short; recovered up to its last whole second", entry.path);
                            report.recovered += 1;
                        }
                        None => {
                            log::warn!("record: {camera}/{name} was cut short before any of it was whole; removed");
                            report.removed += 1;
                        }
                    })
                } else if name.ends_with(".mp4") && clip::parse_clip_name(&name).is_some() {
                    clip::read_entry(root, &camera, &name).map(Some)
                } else {
                    continue;
                };
                match result {
                    Ok(Some(entry)) => {
                        report.clips += 1;
                        index.put(entry);
                    }
                    Ok(None) => {}
                    Err(e) => {
                        log::warn!("record: skipping {camera}/{name}: {e}");
                        report.unreadable += 1;
                    }
                }
            }
        }
        (index, report)
    }

    /// Adds a clip or replaces what the index knew of it.
    pub fn put(&self, entry: ClipEntry) {
        lock(&self.clips).insert(entry.path.clone(), entry);
    }

    pub fn remove(&self, path: &str) -> Option<ClipEntry> {
        lock(&self.clips).remove(path)
    }

    pub fn get(&self, path: &str) -> Option<ClipEntry> {
        lock(&self.clips).get(path).cloned()
    }

    /// `camera`'s clips (every camera's with `None`), newest first, at most `limit`.
    pub fn list(&self, camera: Option<&str>, limit: usize) -> Vec<ClipEntry> {
        self.list_before(camera, None, limit)
    }

    /// [`ClipIndex::list`] of the clips that started before `before` (all with `None`): the next
    /// page after a page whose oldest clip started at `before`.
    pub fn list_before(&self, camera: Option<&str>, before: Option<SystemTime>, limit: usize) -> Vec<ClipEntry> {
        let clips = lock(&self.clips);
        let mut listed: Vec<ClipEntry> = clips
            .values()
            .filter(|entry| camera.is_none_or(|camera| entry.camera == camera))
            .filter(|entry| before.is_none_or(|before| entry.start < before))
            .cloned()
            .collect();
        drop(clips);
        listed.sort_by(|a, b| b.start.cmp(&a.start).then_with(|| b.path.cmp(&a.path)));
        listed.truncate(limit);
        listed
    }

    /// Clips and bytes in the index, per camera.
    pub fn totals(&self) -> BTreeMap<String, (u64, u64)> {
        let mut totals = BTreeMap::new();
        for entry in lock(&self.clips).values() {
            let (count, bytes) = totals.entry(entry.camera.clone()).or_insert((0, 0));
            *count += 1;
            *bytes += entry.bytes;
        }
        totals
    }

    /// Takes the finished clip at `path` out of the index (a user deletes it); the caller deletes
    /// its file. A clip being written stays, and says so.
    pub fn take_finished(&self, path: &str) -> Result<ClipEntry, NotTaken> {
        let mut clips = lock(&self.clips);
        match clips.get(path) {
            None => Err(NotTaken::Unknown),
            Some(entry) if entry.recording => Err(NotTaken::Recording),
            Some(_) => clips.remove(path).ok_or(NotTaken::Unknown),
        }
    }

    /// Takes out of the index the clips retention removes now: every finished clip that ended
    /// more than `max_age` before `now`, then the oldest finished clips while the index holds more
    /// than `max_bytes`. The caller deletes their files.
    pub fn expire(&self, max_bytes: u64, max_age: Option<Duration>, now: SystemTime) -> Vec<ClipEntry> {
        let mut clips = lock(&self.clips);
        let mut total: u64 = clips.values().map(|entry| entry.bytes).sum();
        let mut finished: Vec<(SystemTime, String)> =
            clips.values().filter(|entry| !entry.recording).map(|entry| (entry.start, entry.path.clone())).collect();
        finished.sort();
        let mut expired = Vec::new();
        for (_, path) in finished {
            let Some(entry) = clips.get(&path) else { continue };
            let too_old = max_age.is_some_and(|age| now.duration_since(entry.end).is_ok_and(|since| since > age));
            if !too_old && total <= max_bytes {
                continue;
            }
            if let Some(entry) = clips.remove(&path) {
                total -= entry.bytes;
                expired.push(entry);
            }
        }
        expired
    }
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;

    fn entry(camera: &str, start_s: u64, bytes: u64, recording: bool) -> ClipEntry {
        let start = UNIX_EPOCH + Duration::from_secs(1_800_000_000 + start_s);
        ClipEntry {
            camera: camera.into(),
            path: clip::clip_name(camera, start, 1),
            start,
            end: start + Duration::from_secs(10),
            tracks: vec![1],
            bytes,
            recording,
            recovered: false,
        }
    }

    #[test]
    fn retention_removes_the_oldest_finished_clips_until_the_total_fits() {
        let index = ClipIndex::default();
        for (start, bytes, recording) in [(0, 400, false), (100, 300, true), (200, 300, false), (300, 300, false)] {
            index.put(entry("gate", start, bytes, recording));
        }
        let now = UNIX_EPOCH + Duration::from_secs(1_800_000_400);
        let expired = index.expire(700, None, now);
        let starts: Vec<u64> = expired
            .iter()
            .map(|e| e.start.duration_since(UNIX_EPOCH).expect("epoch").as_secs() - 1_800_000_000)
            .collect();
        assert_eq!(starts, [0, 200], "the recording clip stays, the two oldest finished ones go");
        assert_eq!(index.totals()["gate"], (2, 600));
    }

    #[test]
    fn retention_removes_clips_past_the_age_limit_whatever_the_total() {
        let index = ClipIndex::default();
        index.put(entry("gate", 0, 1, false));
        index.put(entry("back", 1000, 1, false));
        let now = UNIX_EPOCH + Duration::from_secs(1_800_000_000 + 2000);
        let expired = index.expire(u64::MAX, Some(Duration::from_secs(1500)), now);
        assert_eq!(expired.iter().map(|e| e.camera.as_str()).collect::<Vec<_>>(), ["gate"]);
        assert!(index.expire(u64::MAX, None, now).is_empty());
    }

    #[test]
    fn clips_are_listed_newest_first_per_camera() {
        let index = ClipIndex::default();
        for (camera, start) in [("gate", 0), ("back", 50), ("gate", 100), ("gate", 200)] {
            index.put(entry(camera, start, 1, false));
        }
        let gate = index.list(Some("gate"), 2);
        assert_eq!(gate.len(), 2);
        assert!(gate[0].start > gate[1].start && gate.iter().all(|e| e.camera == "gate"));
        assert_eq!(index.list(None, 10).len(), 4);
        assert!(index.list(Some("none"), 10).is_empty());
        let newest = index.list(Some("gate"), 1);
        let older = index.list_before(Some("gate"), Some(newest[0].start), 10);
        assert!(!older.is_empty() && older.iter().all(|entry| entry.start < newest[0].start), "the next page");
        assert_eq!(older.len() + 1, index.list(Some("gate"), 10).len(), "pages miss nothing");
    }

    #[test]
    fn a_rebuild_reads_clips_recovers_parts_and_leaves_other_files_alone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let gate = dir.path().join("gate");
        std::fs::create_dir_all(&gate).expect("mkdir");
        std::fs::write(gate.join("notes.txt"), "mine").expect("write");
        std::fs::write(gate.join("20261118T110640.123Z-4.mp4.part"), b"not even a header").expect("write");
        std::fs::create_dir_all(dir.path().join("not a camera")).expect("mkdir");
        let (index, report) = ClipIndex::rebuild(dir.path(), &[]);
        assert_eq!(report, Rebuilt { clips: 0, recovered: 0, removed: 1, unreadable: 0 });
        assert!(index.list(None, 10).is_empty());
        assert!(gate.join("notes.txt").exists() && !gate.join("20261118T110640.123Z-4.mp4.part").exists());
        let (_, report) = ClipIndex::rebuild(&dir.path().join("absent"), &[]);
        assert_eq!(report, Rebuilt::default());
    }

    /// Issue 49: a second daemon on the same record directory "recovered" the first one's live
    /// `.part` file.
    #[test]
    fn a_rebuild_leaves_a_folder_another_recorder_holds_alone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let gate = dir.path().join("gate");
        let held = super::super::dir::FolderLock::take(&gate).expect("the other recorder's lock");
        let part = gate.join("20261118T110640.123Z-4.mp4.part");
        std::fs::write(&part, b"being written").expect("write");
        let (_, report) = ClipIndex::rebuild(dir.path(), &[]);
        assert_eq!(report, Rebuilt::default());
        assert!(part.exists(), "a clip being written is not recovered");
        let (_, report) = ClipIndex::rebuild(dir.path(), &["gate"]);
        assert_eq!(report.removed, 1, "its own folder is read");
        drop(held);
    }

    #[test]
    fn a_user_takes_a_finished_clip_out_but_not_one_being_written_nor_one_unknown() {
        let index = ClipIndex::default();
        let (done, writing) = (entry("gate", 0, 1, false), entry("gate", 100, 1, true));
        index.put(done.clone());
        index.put(writing.clone());
        assert_eq!(index.take_finished(&done.path).map(|entry| entry.path), Ok(done.path.clone()));
        assert_eq!(index.take_finished(&done.path), Err(NotTaken::Unknown), "gone once taken");
        assert_eq!(index.take_finished(&writing.path), Err(NotTaken::Recording));
        assert!(index.get(&writing.path).is_some(), "the clip being written stays");
    }
}
