//! A clip deleted at a user's request (the API's `DELETE`, which needs the token): out of the
//! index first, so that nothing lists or serves it any more, then its file.
//!
//! Owns: [`delete`] and [`DeleteError`]. Must not: delete a clip being written, or a file the
//! index does not name (a request path never becomes a file path by itself).

use std::path::Path;

use super::clip::ClipEntry;
use super::index::{ClipIndex, NotTaken};

#[derive(Debug, thiserror::Error)]
pub enum DeleteError {
    #[error("no clip {0}")]
    Unknown(String),
    #[error("the clip {0} is still recording; it can be deleted once complete")]
    Recording(String),
    #[error("cannot delete the clip {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// Deletes the finished clip at `path` (`<camera>/<file>`) of the record directory `root`.
pub fn delete(root: &Path, index: &ClipIndex, path: &str) -> Result<ClipEntry, DeleteError> {
    let entry = index.take_finished(path).map_err(|why| match why {
        NotTaken::Unknown => DeleteError::Unknown(path.to_owned()),
        NotTaken::Recording => DeleteError::Recording(path.to_owned()),
    })?;
    match std::fs::remove_file(root.join(&entry.path)) {
        Ok(()) => {
            log::info!("record: removed {} (deleted through the API)", entry.path);
            Ok(entry)
        }
        // Gone already: what was asked is done.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(entry),
        Err(source) => {
            // The file stays: so does its entry, for retention to account for.
            index.put(entry.clone());
            Err(DeleteError::Io { path: entry.path, source })
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    #[test]
    fn a_deleted_clip_leaves_the_index_and_the_disk_and_one_being_written_stays() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("gate")).expect("mkdir");
        let index = ClipIndex::default();
        let clip = |name: &str, recording: bool| {
            let entry = ClipEntry {
                camera: "gate".into(),
                path: format!("gate/{name}"),
                start: UNIX_EPOCH + Duration::from_secs(1_800_000_000),
                end: UNIX_EPOCH + Duration::from_secs(1_800_000_010),
                tracks: vec![1],
                bytes: 4,
                recording,
                recovered: false,
            };
            std::fs::write(dir.path().join(&entry.path), b"mp4!").expect("write");
            index.put(entry.clone());
            entry
        };
        let (done, writing) = (clip("a.mp4", false), clip("b.mp4", true));
        assert_eq!(delete(dir.path(), &index, &done.path).expect("deleted"), done);
        assert!(!dir.path().join(&done.path).exists() && index.get(&done.path).is_none());
        assert!(matches!(delete(dir.path(), &index, &done.path), Err(DeleteError::Unknown(_))), "once");
        assert!(matches!(delete(dir.path(), &index, &writing.path), Err(DeleteError::Recording(_))));
        assert!(dir.path().join(&writing.path).exists() && index.get(&writing.path).is_some());
        assert!(matches!(delete(dir.path(), &index, "../etc/passwd"), Err(DeleteError::Unknown(_))));
    }
}
