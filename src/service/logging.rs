//! Log output: journald when the journal socket is there (running under systemd), else stderr.
//!
//! Owns: logger installation and the level (config `device.log_level`, overridden by `RUST_LOG`).
//! Must not: be called twice, or log secrets (callers never pass passwords to `log`).

use log::LevelFilter;

/// Installs the logger. `RUST_LOG` (env_logger syntax, e.g. `debug` or
/// `jetson_detectd::infer::camera=debug`) wins over the configured level.
pub fn init(configured: LevelFilter) {
    let rust_log = std::env::var("RUST_LOG").ok().filter(|v| !v.trim().is_empty());
    if systemd_journal_logger::connected_to_journal() {
        if let Ok(journal) = systemd_journal_logger::JournalLog::new() {
            let level = rust_log.as_deref().and_then(|v| v.parse::<LevelFilter>().ok()).unwrap_or(configured);
            if journal.with_syslog_identifier("jetson-detectd".into()).install().is_ok() {
                log::set_max_level(level);
                return;
            }
        }
    }
    let mut builder = env_logger::Builder::new();
    builder.filter_level(configured);
    if let Some(filters) = &rust_log {
        builder.parse_filters(filters);
    }
    // A second init (tests that call it again) keeps the first logger; that is harmless.
    let _ = builder.try_init();
}
