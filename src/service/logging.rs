//! Log output: journald when the journal socket is there (running under systemd), else stderr.
//!
//! Owns: logger installation and the level (config `device.log_level`, overridden by `RUST_LOG`),
//! the same filter for both outputs.
//! Must not: be called twice, or log secrets (callers never pass passwords to `log`).

use log::{LevelFilter, Log, Metadata, Record};

/// Installs the logger. `RUST_LOG` (env_logger syntax, e.g. `debug` or
/// `warn,jetson_detectd::publish::mqtt=debug`) wins over the configured level, per-module directives
/// included, under journald as on stderr.
pub fn init(configured: LevelFilter) {
    let rust_log = std::env::var("RUST_LOG").ok().filter(|v| !v.trim().is_empty());
    if systemd_journal_logger::connected_to_journal() {
        if let Ok(journal) = systemd_journal_logger::JournalLog::new() {
            let filtered =
                Filtered::new(configured, rust_log.as_deref(), journal.with_syslog_identifier("jetson-detectd".into()));
            let level = filtered.max_level();
            if log::set_boxed_logger(Box::new(filtered)).is_ok() {
                log::set_max_level(level);
                return;
            }
        }
    }
    let mut builder = filter_builder(configured, rust_log.as_deref());
    // A second init (tests that call it again) keeps the first logger; that is harmless.
    let _ = builder.try_init();
}

fn filter_builder(configured: LevelFilter, rust_log: Option<&str>) -> env_logger::Builder {
    let mut builder = env_logger::Builder::new();
    builder.filter_level(configured);
    if let Some(filters) = rust_log {
        builder.parse_filters(filters);
    }
    builder
}

/// A logger that passes on only what the configured level and `RUST_LOG` let through.
struct Filtered<L> {
    filter: env_logger::Logger,
    inner: L,
}

impl<L: Log> Filtered<L> {
    fn new(configured: LevelFilter, rust_log: Option<&str>, inner: L) -> Self {
        Filtered { filter: filter_builder(configured, rust_log).build(), inner }
    }

    fn max_level(&self) -> LevelFilter {
        self.filter.filter()
    }
}

impl<L: Log> Log for Filtered<L> {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        self.filter.enabled(metadata) && self.inner.enabled(metadata)
    }

    fn log(&self, record: &Record<'_>) {
        if self.filter.matches(record) {
            self.inner.log(record);
        }
    }

    fn flush(&self) {
        self.inner.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[derive(Default)]
    struct Capture(Mutex<Vec<String>>);

    impl Log for &Capture {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }
        fn log(&self, record: &Record<'_>) {
            self.0.lock().expect("lock").push(format!("{} {}", record.target(), record.args()));
        }
        fn flush(&self) {}
    }

    fn send(logger: &impl Log, target: &str, level: log::Level, text: &str) {
        logger.log(&Record::builder().target(target).level(level).args(format_args!("{text}")).build());
    }

    #[test]
    fn per_module_rust_log_directives_filter_what_journald_gets() {
        let capture = Capture::default();
        let logger = Filtered::new(LevelFilter::Info, Some("warn,jetson_detectd::publish::mqtt=debug"), &capture);
        send(&logger, "jetson_detectd::publish::mqtt", log::Level::Debug, "mqtt detail");
        send(&logger, "jetson_detectd::infer::camera", log::Level::Info, "pipeline info");
        send(&logger, "jetson_detectd::infer::camera", log::Level::Warn, "pipeline warning");
        assert_eq!(
            *capture.0.lock().expect("lock"),
            ["jetson_detectd::publish::mqtt mqtt detail", "jetson_detectd::infer::camera pipeline warning"]
        );
        assert_eq!(logger.max_level(), LevelFilter::Debug);
    }

    #[test]
    fn without_rust_log_the_configured_level_applies() {
        let capture = Capture::default();
        let logger = Filtered::new(LevelFilter::Warn, None, &capture);
        send(&logger, "jetson_detectd::publish::mqtt", log::Level::Info, "quiet");
        send(&logger, "jetson_detectd::publish::mqtt", log::Level::Error, "loud");
        assert_eq!(*capture.0.lock().expect("lock"), ["jetson_detectd::publish::mqtt loud"]);
    }
}
