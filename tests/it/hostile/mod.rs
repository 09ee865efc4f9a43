//! Hostile and careless input against the real binary (issue 21): FIFOs where files are expected,
//! `/dev/zero` and huge sparse files where a config names a file, files the service user cannot
//! read, numbers out of range, and signals during start-up. Every run is bounded: it must end by
//! itself within [`Pace::daemon_wait`] (a hang is killed and fails the test), its peak RSS must stay
//! under [`MAX_PEAK_RSS`], and it must say which key or file is wrong with the exit status systemd
//! acts on (78: a config problem, never restarted).
//!
//! Unless a case needs the model to run, a config problem is found before the model loads, and
//! `check-config` finds it too: it runs every check `run` makes before opening a device or socket.

use std::ffi::OsStr;
use std::fs::File;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::arch::{as_unprivileged_user, daemon_command as daemon};
use crate::bounded::{run_to_end, Ended};
use crate::broker::{Broker, Received, Subscriber};
use crate::daemon::{images_source, sample, sample_source, RunningDaemon, TestConfig};
use crate::pace::Pace;
use crate::secrets::lay_out_as_a_packaged_secret;

mod models;
mod mqtt;
mod names;
#[cfg(target_arch = "x86_64")]
mod pictures;
mod sources;
mod state;
mod web;

/// Far below what the failures used to take (a 1 GiB password file: 3.2 GB; `/dev/zero`: growing
/// until killed), far above what the daemon needs with the bundled model (under 100 MB on x86_64;
/// under qemu-user the measured process is qemu, whose translation cache comes on top).
const MAX_PEAK_RSS: u64 = 512 << 20;

/// A 1 GiB file that takes no disk space (sparse): reading it whole is what must not happen.
const HUGE_FILE_BYTES: u64 = 1 << 30;

/// Runs `command` to its end ([`run_to_end`]: killed, and the test failed, after
/// [`Pace::daemon_wait`]); fails when its peak RSS reached [`MAX_PEAK_RSS`].
fn run_bounded(what: &str, command: Command) -> Ended {
    let ended = run_to_end(what, command);
    assert!(ended.peak_rss < MAX_PEAK_RSS, "{what}: peak RSS {} MiB; stderr:\n{}", ended.peak_rss >> 20, ended.stderr);
    ended
}

/// `jetson-detectd <command> --config <config>`, bounded.
fn run_command(what: &str, command: &str, config: &Path) -> Ended {
    let mut binary = daemon();
    binary.args([command, "--config"]).arg(config).env_remove("NOTIFY_SOCKET").env_remove("WATCHDOG_USEC");
    run_bounded(&format!("{what} ({command})"), binary)
}

/// A temporary directory the service user can search and read (tempfile's are private).
fn shared_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    dir
}

/// A config for these tests: CPU backend, the bundled model, a broker port nobody listens on (the
/// daemon runs without one), no wait for it at shutdown.
fn config() -> TestConfig {
    TestConfig::new(1, "hostile").set("mqtt", "shutdown_flush_ms", "0")
}

/// A config whose daemon serves the page on a free loopback port, without a token (the default),
/// its zones file in `dir`.
fn web_config(broker_port: u16, prefix: &str, dir: &Path) -> TestConfig {
    TestConfig::new(broker_port, prefix).set("http", "listen", "\"127.0.0.1:0\"").set(
        "http",
        "zones_file",
        &format!("{:?}", dir.join("zones.toml").display().to_string()),
    )
}

/// A config with one camera showing a bundled sample once.
fn one_camera() -> TestConfig {
    config().camera("front", 0.0, &sample_source("chelsea.png", "once"))
}

fn mkfifo(path: &Path) -> PathBuf {
    let name = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("path");
    // SAFETY: mkfifo reads the NUL-terminated path for the duration of the call only.
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o644) }, 0, "mkfifo: {}", std::io::Error::last_os_error());
    path.to_path_buf()
}

fn huge_sparse_file(path: &Path) -> PathBuf {
    File::create(path).and_then(|file| file.set_len(HUGE_FILE_BYTES)).expect("sparse file");
    path.to_path_buf()
}

fn toml_path(path: &Path) -> String {
    format!("{:?}", path.display().to_string())
}

/// The files a config names, each replaced by something that is not a usable file: both
/// `check-config` and `run` exit 78 at once naming the key and the path, without reading it whole.
#[test]
fn files_a_config_names_that_are_not_usable_files_exit_78_naming_key_and_path() {
    let dir = shared_dir();
    let fifo = mkfifo(&dir.path().join("fifo"));
    let huge = huge_sparse_file(&dir.path().join("huge"));
    let zero = Path::new("/dev/zero");
    let not_utf8 = dir.path().join("not-utf8");
    std::fs::write(&not_utf8, [0xff, 0xfe, b'x', b'\n']).expect("write");
    let no_pem = dir.path().join("no-pem.pem");
    std::fs::write(&no_pem, "just text\n").expect("write");
    let bad_pem = dir.path().join("bad-pem.pem");
    std::fs::write(&bad_pem, "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n").expect("write");
    let missing = dir.path().join("missing");
    let labels = TestConfig::bundled_labels();
    let password =
        |path: &Path| one_camera().set("mqtt", "username", "\"u\"").set("mqtt", "password_file", &toml_path(path));
    let ca = |path: &Path| one_camera().set("mqtt", "tls", &format!("{{ ca_file = {} }}", toml_path(path)));
    let model = |path: &Path| one_camera().model(path, &labels);
    let cases: Vec<(&str, TestConfig, &str, &Path)> = vec![
        ("labels /dev/zero", one_camera().model(&TestConfig::bundled_model(), zero), "model.labels", zero),
        ("labels FIFO", one_camera().model(&TestConfig::bundled_model(), &fifo), "model.labels", &fifo),
        ("labels 1 GiB", one_camera().model(&TestConfig::bundled_model(), &huge), "model.labels", &huge),
        ("model /dev/zero", model(zero), "model.onnx", zero),
        ("model FIFO", model(&fifo), "model.onnx", &fifo),
        ("model directory", model(dir.path()), "model.onnx", dir.path()),
        ("password /dev/zero", password(zero), "mqtt.password_file", zero),
        ("password FIFO", password(&fifo), "mqtt.password_file", &fifo),
        ("password 1 GiB", password(&huge), "mqtt.password_file", &huge),
        ("password directory", password(dir.path()), "mqtt.password_file", dir.path()),
        ("password missing", password(&missing), "mqtt.password_file", &missing),
        ("password not UTF-8", password(&not_utf8), "mqtt.password_file", &not_utf8),
        ("CA /dev/zero", ca(zero), "mqtt.tls.ca_file", zero),
        ("CA 1 GiB", ca(&huge), "mqtt.tls.ca_file", &huge),
        ("CA without PEM", ca(&no_pem), "mqtt.tls.ca_file", &no_pem),
        ("CA with bad PEM content", ca(&bad_pem), "mqtt.tls.ca_file", &bad_pem),
    ];
    for (n, (what, config, key, path)) in cases.into_iter().enumerate() {
        let config = config.write(&dir.path().join(format!("config-{n}.toml")));
        let path = path.display().to_string();
        for command in ["check-config", "run"] {
            run_command(what, command, &config).assert_config_error(what, &[key, &path]);
        }
    }
}

/// `--config` itself.
#[test]
fn a_config_file_that_is_a_fifo_a_device_or_huge_exits_78_at_once() {
    let dir = shared_dir();
    let fifo = mkfifo(&dir.path().join("config.toml"));
    let huge = huge_sparse_file(&dir.path().join("huge.toml"));
    for path in [fifo.as_path(), Path::new("/dev/zero"), huge.as_path(), dir.path()] {
        let what = format!("--config {}", path.display());
        for command in ["check-config", "run"] {
            run_command(&what, command, path)
                .assert_config_error(&what, &["cannot read config", &path.display().to_string()]);
        }
    }
}

/// The README's own common case: a password file only root can read, and a daemon that runs as
/// its own user. As root (CI) the daemon runs as `nobody` through `setpriv`.
#[test]
fn a_password_file_the_service_user_cannot_read_exits_78_naming_it() {
    let dir = shared_dir();
    let password = dir.path().join("mqtt-password");
    std::fs::write(&password, "secret\n").expect("write");
    std::fs::set_permissions(&password, std::fs::Permissions::from_mode(0o000)).expect("chmod");
    let config = one_camera()
        .set("mqtt", "username", "\"u\"")
        .set("mqtt", "password_file", &toml_path(&password))
        .write(&dir.path().join("config.toml"));
    for command in ["check-config", "run"] {
        let mut binary = daemon();
        binary.args([command, "--config"]).arg(&config).env_remove("NOTIFY_SOCKET");
        let outcome = run_bounded(command, as_unprivileged_user(binary));
        outcome
            .assert_config_error(command, &["mqtt.password_file", &password.display().to_string(), "ermission denied"]);
    }
}

/// The configs `check-config` used to accept and `run` refused: now both refuse them, alike (a
/// `record.dir` `run` cannot create: issue 49).
#[test]
fn check_config_refuses_what_run_refuses() {
    let dir = shared_dir();
    let missing_images = dir.path().join("no-such-images");
    let no_pem = dir.path().join("ca.pem");
    std::fs::write(&no_pem, "not a certificate\n").expect("write");
    let zone =
        "[[camera.zone]]\nname = \"drive\"\npolygon = [[0.0, 0.0], [1.0, 0.0], [1.0, 1.0]]\nlabels = [\"unicorn\"]";
    let a_file = dir.path().join("a-file");
    std::fs::write(&a_file, "not a directory\n").expect("write");
    let recording_into =
        |path: &Path| one_camera().set("record", "enabled", "true").set("record", "dir", &toml_path(path));
    let v4l2 = "{ kind = \"v4l2\", device = \"/dev/null\", width = 640, height = 480, format = \"mjpeg\" }";
    let cases: Vec<(&str, TestConfig, &str)> = vec![
        ("a class the label file lacks", one_camera().set("model", "classes", "[\"unicorn\"]"), "unicorn"),
        ("a zone label the label file lacks", one_camera().append(zone), "camera[0].zone[0].labels"),
        (
            "a missing images folder",
            config().camera("front", 0.0, &images_source(&missing_images, "once")),
            "no-such-images",
        ),
        (
            "a model path that is a directory",
            one_camera().model(dir.path(), &TestConfig::bundled_labels()),
            "model.onnx",
        ),
        ("labels /dev/zero", one_camera().model(&TestConfig::bundled_model(), Path::new("/dev/zero")), "model.labels"),
        (
            "a missing password file",
            one_camera().set("mqtt", "username", "\"u\"").set("mqtt", "password_file", "\"/nonexistent/password\""),
            "mqtt.password_file",
        ),
        (
            "a CA file without PEM",
            one_camera().set("mqtt", "tls", &format!("{{ ca_file = {} }}", toml_path(&no_pem))),
            "mqtt.tls.ca_file",
        ),
        ("/dev/null as a V4L2 camera", config().camera("usb", 0.0, v4l2), "/dev/null"),
        (
            "a missing web token file",
            one_camera().set("http", "listen", "\"127.0.0.1:0\"").set(
                "http",
                "token_file",
                "\"/nonexistent/http-token\"",
            ),
            "http.token_file",
        ),
        ("a record.dir that is a file", recording_into(&a_file), "record.dir"),
        ("a record.dir under a file", recording_into(&a_file.join("clips")), "record.dir"),
        ("a record.dir nothing can be created in", recording_into(Path::new("/proc/clips")), "record.dir"),
    ];
    for (n, (what, config, wanted)) in cases.into_iter().enumerate() {
        let config = config.write(&dir.path().join(format!("config-{n}.toml")));
        let checked = run_command(what, "check-config", &config);
        checked.assert_config_error(what, &[wanted]);
        let ran = run_command(what, "run", &config);
        ran.assert_config_error(what, &[wanted]);
    }
}

/// Numbers that passed validation and then aborted the daemon (`frame_slots = 10^12`), kept
/// SIGTERM from finishing (`shutdown_flush_ms`), or retried forever (`port = 0`, a port in `host`).
#[test]
fn out_of_range_numbers_exit_78_naming_the_key() {
    let dir = shared_dir();
    let big_synthetic = "{ kind = \"synthetic\", width = 16384, height = 16384 }";
    let cases: Vec<(TestConfig, &str)> = vec![
        (one_camera().set("engine", "frame_slots", "1000000000000"), "engine.frame_slots"),
        (one_camera().set("mqtt", "shutdown_flush_ms", "1000000000000"), "mqtt.shutdown_flush_ms"),
        (one_camera().set("mqtt", "reconnect_max_ms", "1000000000000"), "mqtt.reconnect_max_ms"),
        (one_camera().set("mqtt", "port", "0"), "mqtt.port"),
        (one_camera().set("mqtt", "host", "\"127.0.0.1:24719\""), "mqtt.host"),
        (config().camera("big", 0.0, big_synthetic), "limits.max_alloc_mib"),
    ];
    for (n, (config, key)) in cases.into_iter().enumerate() {
        let config = config.write(&dir.path().join(format!("config-{n}.toml")));
        for command in ["check-config", "run"] {
            run_command(key, command, &config).assert_config_error(key, &[key]);
        }
    }
}

/// A password put into `password_env` by mistake is neither echoed in the error nor printed.
#[test]
fn a_password_in_password_env_is_refused_and_never_echoed() {
    let dir = shared_dir();
    let secret = "hunter2 correct-horse!";
    let config = one_camera()
        .set("mqtt", "username", "\"u\"")
        .set("mqtt", "password_env", &format!("{secret:?}"))
        .write(&dir.path().join("config.toml"));
    let mut binary = daemon();
    binary.args(["check-config", "--print", "--config"]).arg(&config);
    let outcome = run_bounded("password_env", binary);
    outcome.assert_config_error("password_env", &["mqtt.password_env"]);
    assert!(!outcome.stderr.contains("hunter2") && !outcome.stdout.contains("hunter2"), "{}", outcome.stderr);
}

/// `detect fifo.jpg dog.jpg` never returned; a 1 GiB image file was not a problem but is bounded
/// too: each is that file's error and the file after it is still detected.
#[test]
fn detect_refuses_a_fifo_and_a_huge_file_and_goes_on_with_the_next_file() {
    let dir = shared_dir();
    let fifo = mkfifo(&dir.path().join("fifo.jpg"));
    let huge = huge_sparse_file(&dir.path().join("huge.jpg"));
    let config = one_camera().write(&dir.path().join("config.toml"));
    let mut binary = daemon();
    binary.args(["detect", "--config"]).arg(&config).arg(&fifo).arg(&huge).arg(sample("dog.jpg"));
    let outcome = run_bounded("detect", binary);
    assert_eq!(outcome.status.code(), Some(1), "{}", outcome.stderr);
    assert!(outcome.stderr.contains("fifo.jpg") && outcome.stderr.contains("not a regular file"), "{}", outcome.stderr);
    assert!(
        outcome.stderr.contains("huge.jpg") && outcome.stderr.contains("limits.max_alloc_mib"),
        "{}",
        outcome.stderr
    );
    assert_eq!(outcome.stdout.lines().count(), 1, "dog.jpg is detected:\n{}", outcome.stdout);
    assert!(outcome.stdout.contains("\"dog\""), "{}", outcome.stdout);
    println!("detect on a FIFO, a 1 GiB file and an image: peak RSS {} MiB", outcome.peak_rss >> 20);
}

/// A FIFO named like an image in an `images` folder stalled that camera for good (while telemetry
/// said "streaming"), and SIGTERM never completed. Now it is not listed: the other image is
/// processed, the camera ends (mode "once") and the daemon with it.
#[test]
fn run_ignores_a_fifo_in_the_images_folder() {
    let dir = shared_dir();
    let images = dir.path().join("images");
    std::fs::create_dir(&images).expect("mkdir");
    mkfifo(&images.join("a.jpg"));
    std::fs::copy(sample("chelsea.png"), images.join("b.png")).expect("copy");
    let config = config().camera("front", 0.0, &images_source(&images, "once")).write(&dir.path().join("config.toml"));
    let outcome = run_command("a FIFO among the images", "run", &config);
    assert!(outcome.status.success(), "{}\n{}", outcome.status, outcome.stderr);
    assert!(outcome.stderr.contains("no more frames"), "{}", outcome.stderr);
}

/// A truncated JPEG decodes with its missing part grey: `detect` says so, and BMP and PPM files
/// (claimed by the README and `detect --help`) decode like PNG and JPEG.
#[test]
fn detect_reports_a_truncated_jpeg_and_reads_bmp_and_ppm() {
    let dir = shared_dir();
    let jpeg = std::fs::read(sample("dog.jpg")).expect("dog.jpg");
    let truncated = dir.path().join("truncated.jpg");
    std::fs::write(&truncated, &jpeg[..jpeg.len() * 3 / 4]).expect("write");
    let cat = image::open(sample("chelsea.png")).expect("chelsea.png");
    let (bmp, ppm) = (dir.path().join("chelsea.bmp"), dir.path().join("chelsea.ppm"));
    cat.to_rgb8().save(&bmp).expect("write BMP");
    cat.to_rgb8().save(&ppm).expect("write PPM");
    let config = one_camera().write(&dir.path().join("config.toml"));
    let mut binary = daemon();
    binary.args(["detect", "--config"]).arg(&config).arg(&truncated).arg(&bmp).arg(&ppm);
    let outcome = run_bounded("detect", binary);
    assert!(outcome.status.success(), "{}", outcome.stderr);
    assert!(
        outcome.stderr.contains("truncated.jpg") && outcome.stderr.contains("truncated JPEG"),
        "{}",
        outcome.stderr
    );
    let lines: Vec<&str> = outcome.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", outcome.stdout);
    assert!(lines[1..].iter().all(|line| line.contains("\"cat\"")), "BMP and PPM decode:\n{}", outcome.stdout);
}

/// SIGHUP during start-up (the model load; minutes of engine build on a Jetson) killed the daemon
/// with status 129, nothing logged. A storm of them from the first log line until the daemon is
/// running must leave it running, applied once it is; SIGTERM then stops it cleanly.
#[test]
fn sighup_before_ready_is_held_and_applied_once_running() {
    let dir = shared_dir();
    let config =
        config().camera("front", 2.0, &sample_source("chelsea.png", "loop")).write(&dir.path().join("config.toml"));
    let wait = Pace::measured().daemon_wait();
    let mut daemon = RunningDaemon::start(&config, &[("RUST_LOG", OsStr::new("info"))]);
    let log = daemon.log_handle();
    let mut sent = 0;
    let deadline = Instant::now() + wait;
    // Polled every millisecond: the model load between the two lines takes a few hundred.
    while !log.text().contains("running:") {
        assert!(daemon.is_running(), "the daemon died during start-up ({sent} SIGHUP sent):\n{}", daemon.log());
        assert!(Instant::now() < deadline, "never ready:\n{}", daemon.log());
        if log.text().contains("starting with") {
            daemon.signal(libc::SIGHUP);
            sent += 1;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(sent > 0, "no SIGHUP went out between `starting with` and `running:`:\n{}", daemon.log());
    daemon.wait_until("the held SIGHUP applied", || log.text().contains("SIGHUP: reloaded"));
    daemon.signal(libc::SIGTERM);
    let status = daemon.wait_exit();
    assert!(status.success(), "{status}:\n{}", daemon.log());
}

/// SIGTERM before the daemon is running ends it at once, not after the model load or engine build.
#[test]
fn sigterm_before_ready_ends_the_daemon_at_once() {
    let dir = shared_dir();
    let config = one_camera().write(&dir.path().join("config.toml"));
    let mut daemon = RunningDaemon::start(&config, &[("RUST_LOG", OsStr::new("info"))]);
    let log = daemon.log_handle();
    daemon.wait_until("the first log line", || log.text().contains("starting with"));
    daemon.signal(libc::SIGTERM);
    let status = daemon.wait_exit();
    assert!(status.success() || status.signal() == Some(libc::SIGTERM), "{status}:\n{}", daemon.log());
}

/// A truncated JPEG among a camera's images decoded silently with grey fill. Now each one is
/// counted in telemetry (`cameras.<name>.truncated`) and only the first is logged.
#[test]
fn truncated_jpegs_are_counted_in_telemetry_and_logged_once() {
    let prefix = "hostile-truncated";
    let broker = Broker::start();
    let dir = shared_dir();
    let images = dir.path().join("images");
    std::fs::create_dir(&images).expect("mkdir");
    let jpeg = std::fs::read(sample("dog.jpg")).expect("dog.jpg");
    std::fs::write(images.join("a.jpg"), &jpeg[..jpeg.len() * 3 / 4]).expect("write");
    let config = TestConfig::new(broker.port(), prefix)
        .set("telemetry", "interval_s", "1")
        .camera("front", 0.0, &images_source(&images, "loop"))
        .write(&dir.path().join("config.toml"));
    let subscriber = Subscriber::connect(&broker, "hostile-truncated-sub", &[&format!("{prefix}/telemetry")]);
    let mut daemon = RunningDaemon::start(&config, &[]);
    let counted = |report: &Received| {
        let report: serde_json::Value = serde_json::from_slice(&report.payload).unwrap_or_default();
        report["cameras"]["front"]["truncated"].as_u64().unwrap_or(0)
    };
    daemon.wait_for_messages(&subscriber, &format!("{prefix}/telemetry"), "two truncated frames counted", |m| {
        m.iter().any(|report| counted(report) >= 2)
    });
    daemon.signal(libc::SIGTERM);
    assert_eq!(daemon.wait_exit().code(), Some(0), "{}", daemon.log());
    assert_eq!(daemon.log().matches("is truncated").count(), 1, "logged once:\n{}", daemon.log());
}

/// Password and token files that every local user could read (0644) or write (0666) were taken
/// without a word. One every local user may write is now refused by both commands (78, naming the
/// key, the file and the fix); one every local user may read is a warning, and the daemon runs.
#[test]
fn secrets_every_local_user_may_write_are_refused_and_those_they_may_read_are_a_warning() {
    let dir = shared_dir();
    let password = dir.path().join("mqtt-password");
    std::fs::write(&password, "secret\n").expect("write");
    let token = dir.path().join("http-token");
    std::fs::write(&token, "a-token-of-enough-length-0123456789\n").expect("write");
    let config = one_camera()
        .set("mqtt", "username", "\"u\"")
        .set("mqtt", "password_file", &toml_path(&password))
        .set("http", "listen", "\"127.0.0.1:0\"")
        .set("http", "token_file", &toml_path(&token))
        .write(&dir.path().join("config.toml"));
    // The secret not under test is laid out as the package does: as root, check-config refuses a
    // secret the service's group may not read where the machine has that group.
    lay_out_as_a_packaged_secret(&token);
    std::fs::set_permissions(&password, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    let path = password.display().to_string();
    for command in ["check-config", "run"] {
        run_command("a password file anyone may write", command, &config).assert_config_error(
            command,
            &["mqtt.password_file", &path, "every local user may write it", "chmod 0640"],
        );
    }
    lay_out_as_a_packaged_secret(&password);
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let checked = run_command("a token file anyone may read", "check-config", &config);
    assert!(checked.status.success(), "{}\n{}", checked.status, checked.stderr);
    let warning = checked.stderr.lines().find(|line| line.starts_with("warning: ")).unwrap_or_default();
    assert!(
        warning.contains("http.token_file") && warning.contains(&token.display().to_string()),
        "{}",
        checked.stderr
    );
}
