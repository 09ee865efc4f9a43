//! Case counts for the property tests (`proptest`; test builds only).
//!
//! Owns: turning a test's case count into a proptest config, so that one environment variable,
//! `PROPTEST_CASES`, scales every property test (the aarch64 suite under qemu runs 10-20x slower
//! than the host). Must not: hold strategies — they live next to the code they test. Failures are
//! not persisted to files: a minimised failing case becomes a regular unit test instead.

use proptest::test_runner::Config;

/// `cases` on the host; `PROPTEST_CASES`, when set, replaces it.
pub fn config(cases: u32) -> Config {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|value| value.parse().ok()).unwrap_or(cases);
    Config { cases, failure_persistence: None, ..Config::default() }
}
