//! The zones file (zones and lines saved from the web page) against the real binary (issue 33,
//! item 6): when it replaces a camera's zones from the config, `check-config` and `run` say so, and
//! root's commands use the service's file, as they use the service's cache directory.

use std::path::Path;

use crate::arch::daemon_command;
use crate::daemon::{sample_source, toml_string, RunningDaemon, TestConfig};

const ZONES_FILE: &str = "\
[[camera]]
name = \"front\"

[[camera.zone]]
name = \"lane\"
polygon = [[0.0, 0.6], [1.0, 0.6], [1.0, 1.0], [0.0, 1.0]]
";

/// A config whose camera `front` has a zone and a line of its own, and a zones file that names it.
fn config_and_zones_file(dir: &Path, prefix: &str) -> std::path::PathBuf {
    let zones = dir.join("zones.toml");
    std::fs::write(&zones, ZONES_FILE).expect("write zones file");
    TestConfig::new(1, prefix)
        .set("mqtt", "shutdown_flush_ms", "0")
        .set("http", "zones_file", &toml_string(&zones.display().to_string()))
        .camera("front", 0.0, &sample_source("chelsea.png", "once"))
        .append(
            "[[camera.zone]]\nname = \"porch\"\npolygon = [[0.0, 0.0], [0.5, 0.0], [0.5, 0.5]]\n\
             [[camera.line]]\nname = \"gate\"\npoints = [[0.5, 1.0], [0.5, 0.2]]\n",
        )
        .write(&dir.join("config.toml"))
}

#[test]
fn check_config_and_run_say_when_the_zones_file_replaces_a_cameras_zones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = config_and_zones_file(dir.path(), "zones-file-note");
    let zones = dir.path().join("zones.toml").display().to_string();
    let wanted =
        ["camera \"front\"", zones.as_str(), "1 zone(s), 1 line(s) in the config", "1 zone(s), 0 line(s) in the file"];

    let output = daemon_command().args(["check-config", "--config"]).arg(&config).output().expect("check-config");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    for text in wanted {
        assert!(stderr.contains(text), "check-config must say {text:?}:\n{stderr}");
    }

    let mut daemon = RunningDaemon::start(&config, &[]);
    let status = daemon.wait_exit();
    let log = daemon.log();
    assert!(status.success(), "{status}\n{log}");
    for text in wanted {
        assert!(log.contains(text), "run must log {text:?}:\n{log}");
    }
}

#[test]
fn roots_commands_use_the_services_zones_file() {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: the service's zones file is root's default only");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "[[camera]]\nname = \"front\"\nsource = { kind = \"synthetic\" }\n").expect("write");
    let output = daemon_command()
        .args(["check-config", "--print", "--config"])
        .arg(&config)
        .env_remove("STATE_DIRECTORY")
        .env("XDG_STATE_HOME", dir.path())
        .output()
        .expect("check-config --print");
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(printed.lines().any(|line| line == "zones_file = \"/var/lib/jetson-detectd/zones.toml\""), "{printed}");
}
