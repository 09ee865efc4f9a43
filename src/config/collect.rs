//! Every value of a config that does not fit its type, in one pass: serde stops at the first, so
//! the document is typed again after each one, with that value set aside, until it types.
//!
//! Owns: [`deserialize_all`] and how a value is set aside: replaced by the built-in default's value
//! at the same place (for an element of a list, the default's element of that index, else its
//! first), else removed; when that cannot help (a table that lacks a key the default has none
//! of), the table that holds it is set aside instead. Works on any serde type: a section declared
//! anywhere is typed and reported alike. Must not: word the messages (`super::words`) or locate
//! them (`super::located`).

use serde::de::DeserializeOwned;
use serde_path_to_error::Segment;
use toml::Value;

/// One value that did not fit, at `key` (`serde_path_to_error`'s path: `camera[0].source.width`;
/// empty for the document itself), with serde's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Misfit {
    pub key: String,
    pub message: String,
}

/// Most values set aside in one document: beyond, the rest of a hopeless file is not worth
/// reading (each one types the document again).
const MAX_MISFITS: usize = 64;

/// `value` typed as `T`, and every value that did not fit on the way. With misfits, the `T` (when
/// one typed at all) holds `fallback`'s values in their place: good for checking the rest of the
/// document, not for running. `set_aside` gets the paths that were replaced or removed.
pub fn deserialize_all<T: DeserializeOwned>(
    value: &mut Value,
    fallback: &Value,
    set_aside: &mut Vec<String>,
) -> (Option<T>, Vec<Misfit>) {
    let mut misfits: Vec<Misfit> = Vec::new();
    loop {
        let error = match serde_path_to_error::deserialize::<_, T>(value.clone()) {
            Ok(typed) => return (Some(typed), misfits),
            Err(error) => error,
        };
        let segments: Vec<Step> = error.path().iter().map(Step::from).collect();
        let key = error.path().to_string();
        let key = if key == "." { String::new() } else { key };
        let message = error.into_inner().message().trim_end().to_string();
        // The same place failing again after it was set aside: set its table aside instead.
        let repeated = misfits.iter().filter(|misfit| misfit.key == key).count();
        if misfits.len() >= MAX_MISFITS || segments.is_empty() {
            misfits.push(Misfit { key, message });
            return (None, misfits);
        }
        if repeated == 0 {
            misfits.push(Misfit { key, message });
        }
        let depth = segments.len().saturating_sub(repeated);
        if depth == 0 || !set_aside_at(value, fallback, &segments[..depth]) {
            return (None, misfits);
        }
        set_aside.push(render(&segments[..depth]));
    }
}

/// Sets aside the value at `key` (a path as the checks name keys: `camera[0].zone[1].polygon`) as
/// [`deserialize_all`] sets aside a misfit, so that the checks after the one that named it can run
/// too; whether anything changed.
pub fn set_aside_key(value: &mut Value, fallback: &Value, key: &str) -> bool {
    let steps = parse(key);
    !steps.is_empty() && set_aside_at(value, fallback, &steps)
}

/// `camera[0].zone[1]` → `camera`, 0, `zone`, 1.
fn parse(key: &str) -> Vec<Step> {
    let mut steps = Vec::new();
    for part in key.split('.').filter(|part| !part.is_empty()) {
        let mut pieces = part.split('[');
        if let Some(name) = pieces.next().filter(|name| !name.is_empty()) {
            steps.push(Step::Key(name.to_string()));
        }
        for index in pieces {
            match index.trim_end_matches(']').parse() {
                Ok(index) => steps.push(Step::Index(index)),
                Err(_) => steps.push(Step::Other),
            }
        }
    }
    steps
}

/// One step of a path into a TOML value.
#[derive(Debug, Clone, PartialEq)]
enum Step {
    Key(String),
    Index(usize),
    /// A step `serde_path_to_error` could not name (an enum variant, an unknown place).
    Other,
}

impl From<&Segment> for Step {
    fn from(segment: &Segment) -> Step {
        match segment {
            Segment::Map { key } => Step::Key(key.clone()),
            Segment::Seq { index } => Step::Index(*index),
            _ => Step::Other,
        }
    }
}

fn render(steps: &[Step]) -> String {
    let mut path = String::new();
    for step in steps {
        match step {
            Step::Key(key) if path.is_empty() => path.push_str(key),
            Step::Key(key) => {
                path.push('.');
                path.push_str(key);
            }
            Step::Index(index) => path.push_str(&format!("[{index}]")),
            Step::Other => {}
        }
    }
    path
}

/// Replaces the value at `steps` with `fallback`'s (see the module doc), else removes it from its
/// table or list; whether anything changed.
fn set_aside_at(value: &mut Value, fallback: &Value, steps: &[Step]) -> bool {
    let Some((last, parents)) = steps.split_last() else { return false };
    if parents.contains(&Step::Other) || *last == Step::Other {
        return false;
    }
    let replacement = lookup(fallback, steps);
    let Some(parent) = lookup_mut(value, parents) else { return false };
    match (parent, last) {
        (Value::Table(table), Step::Key(key)) => match replacement {
            // Already the default's: setting it aside cannot help (the mistake is elsewhere).
            Some(replacement) if table.get(key) == Some(&replacement) => false,
            Some(replacement) => {
                table.insert(key.clone(), replacement);
                true
            }
            None => table.remove(key).is_some(),
        },
        (Value::Array(items), Step::Index(index)) if *index < items.len() => match replacement {
            Some(replacement) if items[*index] != replacement => {
                items[*index] = replacement;
                true
            }
            _ => false,
        },
        _ => false,
    }
}

/// The value at `steps` of `fallback`; a list's missing index reads its first element.
fn lookup(fallback: &Value, steps: &[Step]) -> Option<Value> {
    let mut at = fallback;
    for step in steps {
        at = match (at, step) {
            (Value::Table(table), Step::Key(key)) => table.get(key)?,
            (Value::Array(items), Step::Index(index)) => items.get(*index).or_else(|| items.first())?,
            _ => return None,
        };
    }
    Some(at.clone())
}

fn lookup_mut<'a>(value: &'a mut Value, steps: &[Step]) -> Option<&'a mut Value> {
    let mut at = value;
    for step in steps {
        at = match (at, step) {
            (Value::Table(table), Step::Key(key)) => table.get_mut(key)?,
            (Value::Array(items), Step::Index(index)) => items.get_mut(*index)?,
            _ => return None,
        };
    }
    Some(at)
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code, reason = "only typed, to find the misfits")]
    struct Doc {
        mqtt: Mqtt,
        camera: Vec<Camera>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code, reason = "only typed, to find the misfits")]
    struct Mqtt {
        host: String,
        port: u16,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code, reason = "only typed, to find the misfits")]
    struct Camera {
        name: String,
        fps: f32,
    }

    fn toml(text: &str) -> Value {
        Value::Table(text.parse().expect("toml"))
    }

    const DEFAULT: &str = "[mqtt]\nhost = \"localhost\"\nport = 1883\n[[camera]]\nname = \"demo\"\nfps = 2.0\n";

    #[test]
    fn three_mistakes_in_two_sections_are_all_found_in_one_pass() {
        let user = "[mqtt]\nhost = \"b\"\nport = \"x\"\npasword = \"p\"\n\
                    [[camera]]\nname = \"a\"\nfps = 1.0\n[[camera]]\nname = \"b\"\nfps = \"fast\"\n";
        let mut set_aside = Vec::new();
        let (typed, misfits) = deserialize_all::<Doc>(&mut toml(user), &toml(DEFAULT), &mut set_aside);
        // In the order serde meets them: a table's keys sorted.
        let keys: Vec<&str> = misfits.iter().map(|misfit| misfit.key.as_str()).collect();
        assert_eq!(keys, ["camera[1].fps", "mqtt.pasword", "mqtt.port"], "{misfits:?}");
        assert!(misfits[2].message.contains("u16"), "{misfits:?}");
        let typed = typed.expect("types with the misfits set aside");
        assert_eq!((typed.mqtt.port, typed.camera[1].fps), (1883, 2.0), "the default's values stand in");
        assert_eq!(typed.camera[1].name, "b", "nothing else of the camera is replaced");
        assert_eq!(set_aside, keys);
    }

    #[test]
    fn a_table_that_lacks_a_key_is_replaced_by_the_defaults_and_said_once() {
        let user = "[mqtt]\nhost = \"b\"\n[[camera]]\nname = \"a\"\n";
        let mut set_aside = Vec::new();
        let (typed, misfits) = deserialize_all::<Doc>(&mut toml(user), &toml(DEFAULT), &mut set_aside);
        let said: Vec<(&str, &str)> = misfits.iter().map(|m| (m.key.as_str(), m.message.as_str())).collect();
        assert_eq!(said, [("camera[0]", "missing field `fps`"), ("mqtt", "missing field `port`")]);
        assert!(typed.is_some());
    }

    #[test]
    fn a_key_named_by_a_check_is_set_aside_by_its_path() {
        let mut value = toml("[mqtt]\nhost = \"b\"\nport = 70\n[[camera]]\nname = \"a\"\nfps = 1.0\n[[camera]]\nname = \"b\"\nfps = 9.0\n");
        assert!(set_aside_key(&mut value, &toml(DEFAULT), "camera[1].fps"));
        assert!(set_aside_key(&mut value, &toml(DEFAULT), "mqtt.port"));
        assert!(!set_aside_key(&mut value, &toml(DEFAULT), "mqtt.port"), "already the default's");
        assert_eq!(value["camera"][1]["fps"].as_float(), Some(2.0), "the default's first camera stands in");
        assert_eq!(value["mqtt"]["port"].as_integer(), Some(1883));
        assert_eq!(parse("camera[0].zone[12].polygon").len(), 5);
    }

    #[test]
    fn a_document_that_cannot_be_mended_ends_the_pass_with_what_was_found() {
        let mut set_aside = Vec::new();
        let (typed, misfits) =
            deserialize_all::<Doc>(&mut toml("mqtt = 1\n"), &Value::Table(Default::default()), &mut set_aside);
        assert!(typed.is_none());
        assert_eq!(misfits[0].key, "mqtt", "{misfits:?}");
    }
}
