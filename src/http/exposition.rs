//! The two text formats `/metrics` answers in, and which one a scraper gets.
//!
//! Owns: content negotiation on the `Accept` header, and the classic Prometheus text format
//! (version 0.0.4) made from the OpenMetrics text that [`super::metrics`] encodes. Prometheus asks
//! for OpenMetrics by name; older scrapers, `promtool check metrics` and many agents read only the
//! classic format, and `curl` asks for `*/*`: so OpenMetrics goes only to a client that names it
//! (and does not prefer `text/plain`), the classic format to every other. The two differ, for the metrics this daemon exports
//! (no exemplars, no `_created`, no info or state-set families), only in three ways: OpenMetrics
//! names a counter's family without the `_total` its sample carries (the classic format names both
//! with it), has `# UNIT` lines and ends with `# EOF`. Must not: decide metric names or values.

/// The OpenMetrics answer's media type.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The classic text format's media type.
pub const CLASSIC: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The text format of one answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    OpenMetrics,
    /// Prometheus' text format 0.0.4.
    Classic,
}

impl Format {
    /// What an `Accept` header asks for: OpenMetrics when the client names
    /// `application/openmetrics-text` (with a quality above 0) and does not rate `text/plain`
    /// higher; the classic format otherwise — also without a header, for `*/*`, and for media types
    /// neither format is.
    pub fn negotiate(accept: Option<&str>) -> Format {
        let Some(accept) = accept else { return Format::Classic };
        let mut best_openmetrics: Option<f32> = None;
        let mut best_classic: Option<f32> = None;
        for entry in accept.split(',') {
            let mut parts = entry.split(';').map(str::trim);
            let media_type = parts.next().unwrap_or_default().to_ascii_lowercase();
            let mut quality = 1.0f32;
            let mut version = None;
            for parameter in parts {
                let Some((name, value)) = parameter.split_once('=') else { continue };
                let value = value.trim().trim_matches('"');
                match name.trim().to_ascii_lowercase().as_str() {
                    "q" => quality = value.parse().unwrap_or(0.0),
                    "version" => version = Some(value.to_string()),
                    _ => {}
                }
            }
            if quality <= 0.0 {
                continue;
            }
            let slot = match media_type.as_str() {
                "application/openmetrics-text" => &mut best_openmetrics,
                // A text/plain of another version is a format this daemon does not speak.
                "text/plain" if version.as_deref().is_none_or(|v| v == "0.0.4") => &mut best_classic,
                _ => continue,
            };
            *slot = Some(slot.map_or(quality, |best| best.max(quality)));
        }
        match (best_classic, best_openmetrics) {
            (Some(classic), Some(openmetrics)) if classic > openmetrics => Format::Classic,
            (_, Some(_)) => Format::OpenMetrics,
            (_, None) => Format::Classic,
        }
    }

    /// The answer's `Content-Type`.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => OPENMETRICS,
            Format::Classic => CLASSIC,
        }
    }
}

/// The classic text format of an OpenMetrics exposition: counter families renamed to their
/// sample's `_total` name, `# UNIT` and `# EOF` left out; every sample line as it is.
pub fn classic_from_openmetrics(openmetrics: &str) -> String {
    let counters: Vec<&str> =
        openmetrics.lines().filter_map(|line| line.strip_prefix("# TYPE ")?.strip_suffix(" counter")).collect();
    let mut classic = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let descriptor = ["# HELP ", "# TYPE "].into_iter().find_map(|keyword| {
            let rest = line.strip_prefix(keyword)?;
            let (name, text) = rest.split_once(' ').unwrap_or((rest, ""));
            counters.contains(&name).then(|| format!("{keyword}{name}_total {text}"))
        });
        match descriptor {
            Some(renamed) => classic.push_str(renamed.trim_end()),
            None => classic.push_str(line),
        }
        classic.push('\n');
    }
    classic
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_client_that_names_openmetrics_gets_it() {
        let prometheus =
            "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,\
                          text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        for accept in [prometheus, "application/openmetrics-text", "application/openmetrics-text, text/plain"] {
            assert_eq!(Format::negotiate(Some(accept)), Format::OpenMetrics, "{accept}");
        }
    }

    #[test]
    fn curl_promtool_and_scrapers_that_prefer_the_text_format_get_the_classic_one() {
        for accept in [
            None,
            Some("*/*"),
            Some("application/json"),
            Some("text/plain;version=1.0.0"),
            Some("text/plain;version=0.0.4"),
            Some("text/plain"),
            Some("Text/Plain; Version=0.0.4; charset=utf-8"),
            Some("application/openmetrics-text;q=0.3, text/plain;version=0.0.4;q=0.9"),
            Some("text/plain;version=0.0.4;q=0.5, application/openmetrics-text;q=0"),
        ] {
            assert_eq!(Format::negotiate(accept), Format::Classic, "{accept:?}");
        }
    }

    #[test]
    fn counters_are_named_by_their_total_and_unit_and_eof_lines_go() {
        let openmetrics = "# HELP x_frames Frames processed.\n# TYPE x_frames counter\nx_frames_total{camera=\"a\"} 3\n\
                           # HELP x_cpu_ratio CPU.\n# TYPE x_cpu_ratio gauge\n# UNIT x_cpu_ratio ratio\nx_cpu_ratio 0.5\n\
                           # EOF\n";
        assert_eq!(
            classic_from_openmetrics(openmetrics),
            "# HELP x_frames_total Frames processed.\n# TYPE x_frames_total counter\nx_frames_total{camera=\"a\"} 3\n\
             # HELP x_cpu_ratio CPU.\n# TYPE x_cpu_ratio gauge\nx_cpu_ratio 0.5\n"
        );
    }
}
