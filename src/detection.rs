//! Detection results and the labels that name them.
//!
//! Owns: [`Detection`], [`BoundingBox`] (always in source-frame pixels once they leave the decoder),
//! and [`Labels`] (the label file). Must not: know about tensors, MQTT or JSON layout.

use std::path::{Path, PathBuf};

/// Axis-aligned box, corners in pixels (x1 ≤ x2, y1 ≤ y2).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BoundingBox {
    pub x1: f32,
    pub y1: f32,
    pub x2: f32,
    pub y2: f32,
}

impl BoundingBox {
    pub fn area(&self) -> f32 {
        (self.x2 - self.x1).max(0.0) * (self.y2 - self.y1).max(0.0)
    }

    /// Intersection over union; 0 for disjoint or empty boxes.
    pub fn iou(&self, other: &BoundingBox) -> f32 {
        let w = (self.x2.min(other.x2) - self.x1.max(other.x1)).max(0.0);
        let h = (self.y2.min(other.y2) - self.y1.max(other.y1)).max(0.0);
        let inter = w * h;
        let union = self.area() + other.area() - inter;
        if union <= 0.0 {
            0.0
        } else {
            inter / union
        }
    }
}

/// One detected object.
#[derive(Debug, Clone, PartialEq)]
pub struct Detection {
    /// Index into [`Labels`] (the model's class index, after any background column is removed).
    pub class_id: usize,
    pub score: f32,
    pub bbox: BoundingBox,
}

#[derive(Debug, thiserror::Error)]
pub enum LabelsError {
    #[error("cannot read label file {path}: {source}")]
    Read { path: PathBuf, source: crate::sys::files::ReadError },
    #[error("label file {path} has no labels")]
    Empty { path: PathBuf },
    #[error("label file {path}, line {line}: id {id} is not above the previous id")]
    Unordered { path: PathBuf, line: usize, id: usize },
    #[error("label file {path}, line {line}: id {id} is above the largest class id supported, {MAX_CLASS_ID}")]
    IdTooLarge { path: PathBuf, line: usize, id: usize },
}

/// The largest class id a label file may use. Gaps below an id are filled with names, so an
/// unbounded id (`99999999999 person`) would be a memory bomb; real detectors have at most a few
/// thousand classes.
pub const MAX_CLASS_ID: usize = 100_000;

/// Class names by class id. The file has one label per line, either `name` (id = line number) or
/// `id name` (ids ascending; gaps get the name `class<id>`), as the bundled COCO file.
#[derive(Debug, Clone, PartialEq)]
pub struct Labels(Vec<String>);

impl Labels {
    /// Reads the label file at `path` (a regular file of at most
    /// [`MAX_LABELS_BYTES`](crate::sys::files::MAX_LABELS_BYTES)).
    pub fn load(path: &Path) -> Result<Labels, LabelsError> {
        let text = crate::sys::files::read_to_string(path, crate::sys::files::MAX_LABELS_BYTES)
            .map_err(|source| LabelsError::Read { path: path.to_path_buf(), source })?;
        Self::parse(&text, path)
    }

    /// The labels of a label file's `text`; a byte-order mark at its start (Windows editors save
    /// UTF-8 with one) is not part of the first name.
    pub fn parse(text: &str, path: &Path) -> Result<Labels, LabelsError> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let mut names: Vec<String> = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (id, name) = match line.split_once(char::is_whitespace) {
                Some((id, name)) if id.parse::<usize>().is_ok() => {
                    (id.parse::<usize>().unwrap_or_default(), name.trim())
                }
                _ => (names.len(), line),
            };
            if id < names.len() {
                return Err(LabelsError::Unordered { path: path.to_path_buf(), line: index + 1, id });
            }
            if id > MAX_CLASS_ID {
                return Err(LabelsError::IdTooLarge { path: path.to_path_buf(), line: index + 1, id });
            }
            while names.len() < id {
                names.push(format!("class{}", names.len()));
            }
            names.push(name.to_string());
        }
        if names.is_empty() {
            return Err(LabelsError::Empty { path: path.to_path_buf() });
        }
        Ok(Labels(names))
    }

    /// The name of `class_id`, or `class<id>` for ids the file does not cover.
    pub fn name(&self, class_id: usize) -> std::borrow::Cow<'_, str> {
        match self.0.get(class_id) {
            Some(name) => std::borrow::Cow::Borrowed(name),
            None => std::borrow::Cow::Owned(format!("class{class_id}")),
        }
    }

    /// The class id of `name`, if the file has it.
    pub fn id_of(&self, name: &str) -> Option<usize> {
        self.0.iter().position(|n| n == name)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Adds the names of `other` that this list lacks (after its own ids) and returns, for each
    /// class id of `other`, the id of its name here: how the detections of a second detector are
    /// named with the same list as the first's (a name keeps one id across models).
    pub fn absorb(&mut self, other: &Labels) -> Vec<usize> {
        other
            .0
            .iter()
            .map(|name| {
                self.id_of(name).unwrap_or_else(|| {
                    self.0.push(name.clone());
                    self.0.len() - 1
                })
            })
            .collect()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absorbing_a_second_label_list_keeps_every_name_on_one_id() {
        let path = Path::new("labels.txt");
        let mut first = Labels::parse("0 person\n2 car\n", path).expect("first");
        let second = Labels::parse("car\nperson\ntruck\n", path).expect("second");
        assert_eq!(first.absorb(&second), [2, 0, 3]);
        assert_eq!((first.name(3).as_ref(), first.len()), ("truck", 4));
        assert_eq!(first.absorb(&second), [2, 0, 3], "absorbing again adds nothing");
    }

    #[test]
    fn iou_of_half_overlapping_boxes() {
        let a = BoundingBox { x1: 0.0, y1: 0.0, x2: 2.0, y2: 2.0 };
        let b = BoundingBox { x1: 1.0, y1: 0.0, x2: 3.0, y2: 2.0 };
        assert!((a.iou(&b) - 1.0 / 3.0).abs() < 1e-6);
        assert_eq!(a.iou(&BoundingBox { x1: 5.0, y1: 5.0, x2: 6.0, y2: 6.0 }), 0.0);
    }

    /// Issue 35: a label file saved with a UTF-8 byte-order mark named class 0 "\u{feff}person".
    #[test]
    fn a_byte_order_mark_is_not_part_of_the_first_label() {
        let labels = Labels::parse("\u{feff}person\r\ncar\r\n", Path::new("labels.txt")).unwrap();
        assert_eq!(labels.id_of("person"), Some(0));
        assert_eq!(labels.name(0), "person");
        let numbered = Labels::parse("\u{feff}1 person\n", Path::new("labels.txt")).unwrap();
        assert_eq!(numbered.id_of("person"), Some(1));
    }

    #[test]
    fn labels_with_ids_fill_gaps() {
        let labels = Labels::parse("0 person\n2 car\n", Path::new("l")).expect("parse");
        assert_eq!(labels.name(1), "class1");
        assert_eq!(labels.name(2), "car");
        assert_eq!(labels.id_of("car"), Some(2));
        assert_eq!(labels.name(7), "class7");
    }

    #[test]
    fn plain_labels_and_bad_files() {
        let labels = Labels::parse("cat\ndog\n", Path::new("l")).expect("parse");
        assert_eq!(labels.name(1), "dog");
        assert!(matches!(Labels::parse("\n# nothing\n", Path::new("l")), Err(LabelsError::Empty { .. })));
        assert!(matches!(Labels::parse("3 a\n1 b\n", Path::new("l")), Err(LabelsError::Unordered { line: 2, .. })));
    }

    #[test]
    fn a_huge_class_id_is_an_error_not_a_memory_bomb() {
        let err = Labels::parse("0 person\n99999999999 ghost\n", Path::new("l")).expect_err("too large");
        assert!(matches!(err, LabelsError::IdTooLarge { line: 2, id: 99_999_999_999, .. }), "{err}");
        let largest = Labels::parse(&format!("{MAX_CLASS_ID} last\n"), Path::new("l")).expect("the largest id");
        assert_eq!(largest.name(MAX_CLASS_ID), "last");
    }

    #[test]
    fn bundled_coco_labels_parse() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/coco_labels.txt");
        let labels = Labels::load(&path).expect("bundled labels");
        assert_eq!(labels.name(0), "person");
        assert_eq!(labels.id_of("dog"), Some(17));
    }
}
