//! A serde error about a config value, told as a user needs it: what the file holds, what the key
//! allows in words (`a whole number from 0 to 65535`, not `expected u16`), and, for an unknown key
//! or value, the nearest one allowed (`did you mean `password_file`?`).
//!
//! Owns: [`explain`], reading serde's standard messages (`unknown field …, expected one of …`,
//! `invalid type: …, expected …`, `missing field …`) and the words for the types the schema uses.
//! Must not: know the schema's keys: the allowed names come from the error's own list, so the
//! words stay true for any section, wherever it is declared.

/// `message` (serde's, about one key) in words; a message of another form is returned as it is.
pub fn explain(message: &str) -> String {
    if let Some(rest) = message.strip_prefix("unknown field ") {
        let (found, allowed) = unknown(rest);
        return no_such_key(&found, &allowed);
    }
    if let Some(rest) = message.strip_prefix("unknown variant ") {
        let (found, allowed) = unknown(rest);
        let quoted: Vec<String> = allowed.iter().map(|name| format!("{name:?}")).collect();
        return match nearest(&found, &allowed) {
            Some(near) => format!("{found:?} is not allowed; did you mean {near:?}? (allowed: {})", quoted.join(", ")),
            None => format!("{found:?} is not allowed (allowed: {})", quoted.join(", ")),
        };
    }
    if let Some(field) = message.strip_prefix("missing field ") {
        return format!("{} must be set here", field.trim());
    }
    let split = |prefix: &str| message.strip_prefix(prefix).and_then(|rest| rest.split_once(", expected "));
    if let Some((found, expected)) = split("invalid type: ") {
        return format!("{}; allowed: {}", found_words(found), expected_words(expected));
    }
    if let Some((found, expected)) = split("invalid value: ") {
        return format!("{} is out of range; allowed: {}", value_words(found), expected_words(expected));
    }
    message.to_string()
}

/// A key `found` where only `allowed` are: the nearest one, if it looks like a typo, and the list.
pub fn no_such_key(found: &str, allowed: &[impl AsRef<str>]) -> String {
    let allowed: Vec<String> = allowed.iter().map(|name| name.as_ref().to_string()).collect();
    match nearest(found, &allowed) {
        Some(near) => format!("no such key; did you mean `{near}`? (allowed here: {})", allowed.join(", ")),
        None if allowed.is_empty() => "no such key: this table takes none".to_string(),
        None => format!("no such key (allowed here: {})", allowed.join(", ")),
    }
}

/// `` `x`, expected one of `a`, `b` `` → (`x`, [`a`, `b`]); also `expected `a``, `there are no
/// fields`.
fn unknown(rest: &str) -> (String, Vec<String>) {
    let (found, expected) = rest.split_once(", ").unwrap_or((rest, ""));
    let names = expected.split('`').skip(1).step_by(2).map(str::to_string).collect();
    (found.trim_matches('`').to_string(), names)
}

/// The allowed name closest to `found` by edit distance, when close enough to be a typo: at most
/// one edit in three characters (`pasword_file` → `password_file`, `hots` → `host`).
fn nearest(found: &str, allowed: &[String]) -> Option<String> {
    let found_lower = found.to_lowercase();
    allowed
        .iter()
        .map(|name| (strsim::damerau_levenshtein(&found_lower, &name.to_lowercase()), name))
        .filter(|(distance, name)| *distance <= (name.chars().count().max(found.chars().count()) / 3).max(1))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, name)| name.clone())
}

/// serde's `Unexpected` as the file holds it: `string "x"` → `"x" is text`.
fn found_words(found: &str) -> String {
    let kinds = [("string ", "text"), ("integer ", "a whole number"), ("floating point ", "a number with a fraction")];
    for (prefix, kind) in kinds.into_iter().chain([("boolean ", "true or false")]) {
        if found.starts_with(prefix) {
            return format!("{} is {kind}", value_words(found));
        }
    }
    match found {
        "sequence" => "a list is given".to_string(),
        "map" => "a table is given".to_string(),
        other => format!("{other} is given"),
    }
}

/// The value of serde's `Unexpected`: `floating point `2.5`` → `2.5`, `string "x"` → `"x"`.
fn value_words(found: &str) -> String {
    if let Some(text) = found.strip_prefix("string ") {
        return text.to_string();
    }
    match found.split('`').nth(1) {
        Some(value) => value.to_string(),
        None => found.to_string(),
    }
}

/// serde's `Expected` for the types the schema uses, in words.
fn expected_words(expected: &str) -> String {
    let whole = |max: &str| format!("a whole number from 0 to {max}");
    match expected.trim_start_matches("a nonzero ") {
        _ if expected.starts_with("a nonzero ") => "a whole number, at least 1".to_string(),
        "u8" => whole("255"),
        "u16" => whole("65535"),
        "u32" => whole("4294967295"),
        "u64" | "usize" => "a whole number, 0 or more".to_string(),
        "i8" | "i16" | "i32" | "i64" | "isize" => "a whole number".to_string(),
        "f32" | "f64" => "a number (like 2 or 0.5)".to_string(),
        "a boolean" => "true or false".to_string(),
        "a string" | "a borrowed string" | "path string" => "text in quotes".to_string(),
        "a sequence" => "a list, in [ ]".to_string(),
        "a map" => "a table".to_string(),
        other if other.starts_with("struct ") || other.starts_with("internally tagged enum ") => {
            "a table ([name] or { key = value, … })".to_string()
        }
        other if other.starts_with("an array of length ") || other.starts_with("a tuple of size ") => {
            let count = other.rsplit(' ').next().unwrap_or_default();
            format!("a list of {count} values, in [ ]")
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_key_gets_the_nearest_allowed_one_and_the_list() {
        let said = explain("unknown field `pasword_file`, expected one of `host`, `port`, `username`, `password_file`");
        assert_eq!(
            said,
            "no such key; did you mean `password_file`? (allowed here: host, port, username, password_file)"
        );
        let far = explain("unknown field `verbose`, expected one of `host`, `port`");
        assert_eq!(far, "no such key (allowed here: host, port)");
        assert_eq!(explain("unknown field `x`, there are no fields"), "no such key: this table takes none");
    }

    #[test]
    fn an_unknown_value_gets_the_nearest_allowed_one() {
        let said = explain("unknown variant `yolov99`, expected one of `ssd`, `yolov5`, `yolov8`, `end2end`");
        assert!(said.starts_with("\"yolov99\" is not allowed; did you mean \"yolov5\"?"), "{said}");
        assert!(said.contains("\"yolov8\""), "{said}");
        let case = explain("unknown variant `RTSP`, expected one of `images`, `rtsp`");
        assert!(case.contains("did you mean \"rtsp\""), "{case}");
    }

    #[test]
    fn types_are_said_in_words() {
        assert_eq!(
            explain("invalid type: string \"x\", expected u16"),
            "\"x\" is text; allowed: a whole number from 0 to 65535"
        );
        assert_eq!(
            explain("invalid value: integer `70000`, expected u16"),
            "70000 is out of range; allowed: a whole number from 0 to 65535"
        );
        assert_eq!(
            explain("invalid value: integer `0`, expected a nonzero usize"),
            "0 is out of range; allowed: a whole number, at least 1"
        );
        assert_eq!(
            explain("invalid type: floating point `2.5`, expected u32"),
            "2.5 is a number with a fraction; allowed: a whole number from 0 to 4294967295"
        );
        assert_eq!(
            explain("invalid type: integer `1`, expected a boolean"),
            "1 is a whole number; allowed: true or false"
        );
        assert_eq!(
            explain("invalid type: sequence, expected struct MqttConfig"),
            "a list is given; allowed: a table ([name] or { key = value, … })"
        );
        assert_eq!(explain("missing field `width`"), "`width` must be set here");
        assert_eq!(explain("something else"), "something else");
    }
}
