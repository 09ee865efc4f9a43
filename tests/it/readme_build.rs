//! The build the README and `.ci/demo` make (`bash .ci/build`) takes GStreamer wherever the machine
//! has its development files (issue 50, item 1): the binary a newcomer keeps reads RTSP cameras,
//! which `rtsp.rs` proves of a binary built with the `gstreamer` feature. Where the files are
//! missing it says which Debian packages to install and what the binary cannot do.
//!
//! The script runs with `BUILD_DRY_RUN=1`: it prints the cargo command it would run (a release
//! build of the whole crate is minutes CI does not repeat) and installs nothing, also as root.
//! Skipped without GStreamer's development files, except with `CI=true`, where it fails
//! ([`crate::prerequisite`]: `.ci/run` installs them).

use std::path::Path;
use std::process::{Command, Output};

use crate::prerequisite::skip;

/// `bash .ci/build` as a dry run with `env`; its stdout and stderr.
fn dry_run(env: &[(&str, &Path)]) -> (String, String) {
    let mut command = Command::new("bash");
    command
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/build"))
        .env("BUILD_DRY_RUN", "1")
        .env_remove("TENSORRT_INCLUDE_DIR")
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("BUILD_PROFILE");
    for (name, value) in env {
        command.env(name, value);
    }
    let Output { status, stdout, stderr } = command.output().expect("run bash .ci/build");
    let (stdout, stderr) =
        (String::from_utf8_lossy(&stdout).into_owned(), String::from_utf8_lossy(&stderr).into_owned());
    assert!(status.success(), "{status}\n{stdout}\n{stderr}");
    (stdout, stderr)
}

fn gstreamer_development_files() -> bool {
    Command::new("pkg-config")
        .args(["--exists", "gstreamer-1.0", "gstreamer-app-1.0", "gstreamer-video-1.0"])
        .status()
        .is_ok_and(|status| status.success())
}

#[test]
fn the_readme_build_takes_gstreamer_where_pkg_config_finds_it() {
    if !gstreamer_development_files() {
        let why =
            "no GStreamer development files (apt-get install libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev)";
        skip(why);
        return;
    }
    let (stdout, stderr) = dry_run(&[]);
    let command = stdout.lines().next().unwrap_or_default();
    assert!(command.starts_with("cargo build --profile release --bin jetson-detectd"), "{stdout}");
    assert!(command.split_whitespace().any(|word| word.split(',').any(|f| f == "gstreamer")), "{stdout}");
    assert_eq!(stdout.lines().nth(1), Some("target/release/jetson-detectd"), "the binary's path comes last");
    assert!(stderr.contains("RTSP, CSI and GStreamer cameras are built in"), "{stderr}");
}

#[test]
fn without_gstreamer_the_readme_build_names_the_packages_and_what_the_binary_cannot_do() {
    // pkg-config finds nothing in an empty search path: a machine without the development files.
    let empty = tempfile::tempdir().expect("tempdir");
    let (stdout, stderr) = dry_run(&[("PKG_CONFIG_LIBDIR", empty.path()), ("PKG_CONFIG_PATH", empty.path())]);
    assert!(!stdout.contains("gstreamer"), "{stdout}");
    for words in ["WITHOUT RTSP", "sudo apt install", "libgstreamer1.0-dev", "libgstreamer-plugins-base1.0-dev"] {
        assert!(stderr.contains(words), "the note must say {words:?}:\n{stderr}");
    }
}
