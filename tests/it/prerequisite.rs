//! What a black-box test needs from the machine that is not ours to build: a program (chromium,
//! ffprobe, promtool, a registry...), a GStreamer element, a library, a Python package. Every test
//! that cannot run without one asks here, and one rule answers: where it is missing the test says
//! so on stderr (past the harness's capture, so a plain `cargo test` shows it) with how to install
//! it, and passes — except with `CI=true` on x86_64, where it fails: `.ci/run` installs every tool
//! of the host suite, so a skip there would be a test that never ran. The aarch64 suite under qemu
//! (`.ci/run`'s `aarch64_it_tests`) legitimately lacks host tools (ONNX Runtime, Home Assistant,
//! the store servers), so there a missing tool still skips.
//!
//! This module only decides and says; finding a tool is the caller's business (or [`runs`]).

use std::io::Write;
use std::process::{Command, Stdio};

/// True where a missing tool fails the test instead of skipping it.
fn required_here() -> bool {
    std::env::var("CI").as_deref() == Ok("true") && cfg!(target_arch = "x86_64")
}

/// The test cannot run because of `why` (what is missing and how to install it): panics under
/// `CI=true` on x86_64, else says that the test skipped. The caller returns right after.
pub(crate) fn skip(why: &str) {
    assert!(!required_here(), "CI=true: {why}; .ci/run installs it, so this test must run");
    let _ = writeln!(std::io::stderr(), "skipped: {why}");
}

/// `Some` of what a prerequisite check found, or `None` after [`skip`] with its reason.
pub(crate) fn or_skip<T>(check: Result<T, String>) -> Option<T> {
    check.map_err(|why| skip(&why)).ok()
}

/// Whether `program arg` runs and exits 0 (its output is discarded): `--version` for most tools,
/// `-version` for ffmpeg's, an element's name for `gst-inspect-1.0`.
pub(crate) fn runs(program: &str, arg: &str) -> bool {
    Command::new(program)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// `Ok` where GStreamer has `element` (`gst-inspect-1.0` finds it), else why not, naming the
/// Debian `package` it comes in.
#[cfg(feature = "gstreamer")]
pub(crate) fn gstreamer_element(element: &str, package: &str) -> Result<(), String> {
    if runs("gst-inspect-1.0", element) {
        Ok(())
    } else {
        Err(format!("GStreamer element {element} is missing (apt-get install {package})"))
    }
}
