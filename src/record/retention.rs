//! Retention: the record directory within `[record]`'s byte and age budget.
//!
//! Owns: [`Retention`] — which clips go and removing their files: the oldest finished clips while
//! the directory would hold more than `max_gib` with the bytes about to be written
//! ([`Retention::make_room`], which each camera's recorder asks before it writes a fragment of its
//! clip, so the clips being written count as they grow), and every finished clip older than
//! `max_days` ([`Retention::run`], after every clip and once a minute); the count of clips removed.
//! What the directory holds beyond the budget is at most the fragments of other cameras written in
//! the moment between one camera's room and its write, and a clip being written that alone is larger
//! than the budget. Must not: remove a clip being written (the index's [`ClipIndex::expire`] never
//! offers one), touch files other than the clips the index names, or hold the index's lock across
//! I/O.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::clip::ClipEntry;
use super::index::ClipIndex;

/// The byte and age budget of one record directory.
#[derive(Debug)]
pub struct Retention {
    root: PathBuf,
    index: Arc<ClipIndex>,
    max_bytes: u64,
    /// `None`: no age limit (`max_days = 0`).
    max_age: Option<Duration>,
    removed: AtomicU64,
}

impl Retention {
    pub fn new(root: PathBuf, index: Arc<ClipIndex>, max_bytes: u64, max_age: Option<Duration>) -> Retention {
        Retention { root, index, max_bytes, max_age, removed: AtomicU64::new(0) }
    }

    /// Removes the oldest finished clips until `incoming` more bytes fit in the budget with every
    /// clip the index holds, those being written included.
    pub fn make_room(&self, incoming: u64) {
        let expired = self.index.expire(self.max_bytes.saturating_sub(incoming), None, SystemTime::now());
        self.remove(expired);
    }

    /// Removes every finished clip past the age limit at `now`, then the oldest while the
    /// directory is over the budget.
    pub fn run(&self, now: SystemTime) {
        let expired = self.index.expire(self.max_bytes, self.max_age, now);
        self.remove(expired);
    }

    fn remove(&self, expired: Vec<ClipEntry>) {
        for entry in expired {
            match std::fs::remove_file(self.root.join(&entry.path)) {
                Ok(()) => {
                    self.removed.fetch_add(1, Ordering::Relaxed);
                    log::info!("record: removed {} (retention)", entry.path);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => log::warn!("record: cannot remove {}: {e}", entry.path),
            }
        }
    }

    /// The byte budget (`record.max_gib`).
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// Clips removed since start.
    pub fn removed(&self) -> u64 {
        self.removed.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;
    use crate::record::clip::clip_name;

    /// A clip of `bytes` bytes in `root`, indexed, started `start_s` seconds into the test's day.
    fn clip(root: &std::path::Path, index: &ClipIndex, start_s: u64, bytes: u64, recording: bool) -> ClipEntry {
        let start = UNIX_EPOCH + Duration::from_secs(1_800_000_000 + start_s);
        let path = clip_name("gate", start, start_s);
        let file = root.join(if recording { format!("{path}.part") } else { path.clone() });
        std::fs::create_dir_all(file.parent().expect("a folder")).expect("mkdir");
        std::fs::write(&file, vec![0; bytes as usize]).expect("write the clip");
        let entry = ClipEntry {
            camera: "gate".into(),
            path,
            start,
            end: start + Duration::from_secs(10),
            tracks: vec![start_s],
            bytes,
            recording,
            recovered: false,
        };
        index.put(entry.clone());
        entry
    }

    #[test]
    fn room_for_a_fragment_counts_the_clip_being_written_and_removes_the_oldest_finished_first() {
        let dir = tempfile::tempdir().expect("tempdir");
        let index = Arc::new(ClipIndex::default());
        let oldest = clip(dir.path(), &index, 0, 400, false);
        let newer = clip(dir.path(), &index, 100, 400, false);
        let recording = clip(dir.path(), &index, 200, 150, true);
        let retention = Retention::new(dir.path().to_path_buf(), index.clone(), 1000, None);

        retention.make_room(50);
        assert_eq!(retention.removed(), 0, "950 + 50 fit in 1000");
        retention.make_room(60);
        assert_eq!(retention.removed(), 1, "950 + 60 do not: the oldest finished clip goes");
        assert!(!dir.path().join(&oldest.path).exists() && index.get(&oldest.path).is_none());
        assert!(dir.path().join(&newer.path).exists());
        retention.make_room(900);
        assert_eq!(retention.removed(), 2, "the clip being written stays, whatever it costs");
        assert!(index.get(&recording.path).is_some());
    }

    #[test]
    fn a_run_removes_clips_past_the_age_limit_within_the_budget_too() {
        let dir = tempfile::tempdir().expect("tempdir");
        let index = Arc::new(ClipIndex::default());
        let old = clip(dir.path(), &index, 0, 10, false);
        let young = clip(dir.path(), &index, 86_400, 10, false);
        let retention = Retention::new(dir.path().to_path_buf(), index.clone(), 1000, Some(Duration::from_secs(3600)));
        retention.run(young.end + Duration::from_secs(60));
        assert_eq!(retention.removed(), 1);
        assert!(index.get(&old.path).is_none() && index.get(&young.path).is_some());
    }
}
