//! Where each key of a config file sits: its line and column, read from the user's text with
//! toml's spans (the typed config, merged over the built-in default, keeps none).
//!
//! Owns: [`SourceMap`] (every key and array element of one file by its path, written as
//! `serde_path_to_error` writes paths: `camera[0].source.width`) and [`Location`]. Must not: type
//! values or decide what is wrong with them.

use std::fmt;

use toml::de::{DeTable, DeValue};
use toml::Spanned;

/// A place in a file: 1-based line and column (in characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Location {
    pub line: usize,
    pub column: usize,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// The keys of one config file and where each is written.
#[derive(Debug, Default)]
pub struct SourceMap {
    /// Path → where the key (or, for an array element, the value) starts.
    places: Vec<(String, usize)>,
    /// Byte offset of each line's first character.
    line_starts: Vec<usize>,
    text: String,
}

impl SourceMap {
    /// The places of `text`'s keys; a text that does not parse gives an empty map (its syntax
    /// errors carry their own lines).
    pub fn new(text: &str) -> SourceMap {
        let line_starts = std::iter::once(0).chain(text.match_indices('\n').map(|(at, _)| at + 1)).collect();
        let mut map = SourceMap { places: Vec::new(), line_starts, text: text.to_owned() };
        if let Ok(document) = DeTable::parse(text) {
            map.walk_table(document.get_ref(), "");
        }
        map
    }

    fn walk_table(&mut self, table: &DeTable<'_>, prefix: &str) {
        for (key, value) in table {
            let path =
                if prefix.is_empty() { key.get_ref().to_string() } else { format!("{prefix}.{}", key.get_ref()) };
            self.places.push((path.clone(), key.span().start));
            self.walk_value(value, &path);
        }
    }

    fn walk_value(&mut self, value: &Spanned<DeValue<'_>>, path: &str) {
        match value.get_ref() {
            DeValue::Table(table) => self.walk_table(table, path),
            DeValue::Array(items) => {
                for (index, item) in items.iter().enumerate() {
                    let path = format!("{path}[{index}]");
                    self.places.push((path.clone(), item.span().start));
                    self.walk_value(item, &path);
                }
            }
            _ => {}
        }
    }

    /// Where `path` is written, else where the nearest table or array that holds it is (a key the
    /// file leaves out belongs there); `None` when nothing of the path is in the file.
    pub fn locate(&self, path: &str) -> Option<Location> {
        let mut path = path;
        loop {
            if let Some((_, at)) = self.places.iter().find(|(known, _)| known == path) {
                return Some(self.location(*at));
            }
            path = parent(path)?;
        }
    }

    /// The location of byte offset `at`.
    pub fn location(&self, at: usize) -> Location {
        let line = self.line_starts.partition_point(|&start| start <= at).max(1);
        let start = self.line_starts[line - 1];
        let column = self.text.get(start..at).map_or(1, |before| before.chars().count() + 1);
        Location { line, column }
    }
}

/// `camera[0].source` → `camera[0]` → `camera`; `None` above the top level.
fn parent(path: &str) -> Option<&str> {
    let cut = path.rfind(['.', '['])?;
    Some(&path[..cut])
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "[mqtt]\nhost = \"broker\"\n  pasword_file = \"/x\"\n\n[[camera]]\nname = \"a\"\nsource = { kind = \"v4l2\", device = \"/dev/video0\" }\n\n[[camera]]\nname = \"b\"\n";

    #[test]
    fn keys_are_found_at_their_line_and_column() {
        let map = SourceMap::new(TEXT);
        assert_eq!(map.locate("mqtt.host"), Some(Location { line: 2, column: 1 }));
        assert_eq!(map.locate("mqtt.pasword_file"), Some(Location { line: 3, column: 3 }));
        assert_eq!(map.locate("camera[0].source.device"), Some(Location { line: 7, column: 27 }));
        assert_eq!(map.locate("camera[1].name"), Some(Location { line: 10, column: 1 }));
    }

    #[test]
    fn a_key_the_file_leaves_out_is_placed_at_what_holds_it() {
        let map = SourceMap::new(TEXT);
        assert_eq!(map.locate("camera[0].source.width"), map.locate("camera[0].source"));
        assert_eq!(map.locate("mqtt.tls.ca_file"), map.locate("mqtt"));
        assert_eq!(map.locate("telemetry.interval_s"), None, "nothing of it is in the file");
    }

    #[test]
    fn columns_count_characters_and_a_text_that_does_not_parse_has_no_places() {
        let map = SourceMap::new("[device]\nid = \"é\"\nlog_level = 1\n");
        assert_eq!(map.location(map.text.find("log_level").expect("there")), Location { line: 3, column: 1 });
        let after_accent = map.text.find("\"\n").expect("the closing quote");
        assert_eq!(map.location(after_accent), Location { line: 2, column: 8 });
        assert_eq!(SourceMap::new("[device\nid = 1").locate("device"), None);
    }
}
