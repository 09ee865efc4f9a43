//! The one model for secrets (issue 33): root owns each secret file, the service's group may read
//! it (mode 0640), and the service reads it as a member of that group. As root (CI) the daemon runs
//! through `setpriv` as `nobody`, in the secrets' group (the service) or in no group (a user at a
//! shell); without root these tests say so and skip, since only root can give files away.
//!
//! - The service reads a broker password, two camera passwords and the HTTP token, and logs in.
//! - `check-config` as a user who may not read them says that is expected, and checks the rest.
//! - A secret only root may read fails `check-config` and `run` alike, naming the fix.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::arch::{as_service_user, as_unprivileged_user, daemon_command};
use crate::bounded::run_to_end;
use crate::broker::Broker;
use crate::daemon::{sample_source, toml_string, RunningDaemon, TestConfig};

/// The group the secrets belong to in these tests where the machine has no `jetson-detectd` group
/// (a fresh CI machine): the daemon's rule is the same for any group.
const STAND_IN_GROUP: u32 = 64_123;

/// The secrets' group: the package's `jetson-detectd` where the machine has it (installing the
/// package creates it, and purging keeps it, as Debian does with system groups; the daemon then
/// takes it for the service's group and no other), else [`STAND_IN_GROUP`].
fn secrets_group() -> u32 {
    let entry = Command::new("getent").args(["group", "jetson-detectd"]).output().expect("run getent");
    String::from_utf8_lossy(&entry.stdout)
        .split(':')
        .nth(2)
        .and_then(|gid| gid.trim().parse().ok())
        .unwrap_or(STAND_IN_GROUP)
}

/// How the daemon names the secrets' group in its notes.
fn secrets_group_name() -> String {
    if secrets_group() == STAND_IN_GROUP {
        STAND_IN_GROUP.to_string()
    } else {
        "jetson-detectd".to_string()
    }
}

/// Lays `path` out as the package lays a secret out: root's and the secrets' group's
/// ([`secrets_group`]), mode 0640. As root `check-config` refuses a secret the service's group may
/// not read, where the machine has that group; without root only the mode is set (only root can
/// give files away).
pub(crate) fn lay_out_as_a_packaged_secret(path: &Path) {
    if is_root() {
        std::os::unix::fs::chown(path, Some(0), Some(secrets_group())).expect("chown");
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o640)).expect("chmod");
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// A directory `nobody` can search, holding the secrets the way the package lays them out.
struct Secrets {
    dir: tempfile::TempDir,
}

impl Secrets {
    fn new() -> Secrets {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
        Secrets { dir }
    }

    /// Writes `content` to `name`, owned by root and `group`, with `mode`.
    fn write(&self, name: &str, content: &str, group: u32, mode: u32) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, content).expect("write secret");
        std::os::unix::fs::chown(&path, Some(0), Some(group)).expect("chown");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        path
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

fn check_config(config: &Path) -> Command {
    let mut command = daemon_command();
    command.arg("check-config").arg("--config").arg(config);
    command
}

/// The README's install path: a broker password and two camera passwords, each root's and the
/// service group's (plus the HTTP token): the config with `n` cameras of `kind`.
fn config_with_secrets(secrets: &Secrets, broker: &Broker, prefix: &str, group: u32, mode: u32) -> TestConfig {
    let password = secrets.write("mqtt-password", "pass word\n", group, mode);
    let token = secrets.write("http-token", "a-long-random-token\n", group, mode);
    let ca = secrets.path().join("ca.pem");
    std::fs::copy(broker.ca_file(), &ca).expect("copy the CA");
    std::fs::set_permissions(&ca, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    TestConfig::new(broker.port(), prefix)
        .set("mqtt", "shutdown_flush_ms", "0")
        .set("mqtt", "username", "\"jetson\"")
        .set("mqtt", "password_file", &toml_string(&password.display().to_string()))
        .set("mqtt", "tls", &format!("{{ ca_file = {} }}", toml_string(&ca.display().to_string())))
        .set("http", "listen", "\"127.0.0.1:0\"")
        .set("http", "token_file", &toml_string(&token.display().to_string()))
}

/// Two RTSP cameras with a password each (checked by `check-config` only: nothing serves them).
#[cfg(feature = "gstreamer")]
fn with_two_cameras(config: TestConfig, secrets: &Secrets, group: u32, mode: u32) -> TestConfig {
    let mut config = config;
    for (name, address) in [("porch", "192.0.2.20"), ("drive", "192.0.2.21")] {
        let password = secrets.write(&format!("{name}.pw"), "camera password\n", group, mode);
        config = config.camera(
            name,
            10.0,
            &format!(
                "{{ kind = \"rtsp\", url = \"rtsp://{address}:554/stream1\", user = \"viewer\", password_file = {} }}",
                toml_string(&password.display().to_string())
            ),
        );
    }
    config
}

#[cfg(not(feature = "gstreamer"))]
fn with_two_cameras(config: TestConfig, _: &Secrets, _: u32, _: u32) -> TestConfig {
    config.camera("front", 0.0, &sample_source("chelsea.png", "once"))
}

#[test]
fn the_service_reads_root_owned_secrets_through_its_group_and_logs_in() {
    if !is_root() {
        eprintln!("skipped: only root can give secret files to a group and run as the service user");
        return;
    }
    let broker = Broker::start_secured("jetson", "pass word");
    let secrets = Secrets::new();
    let base = config_with_secrets(&secrets, &broker, "secrets-service", secrets_group(), 0o640);
    let cameras =
        with_two_cameras(base.clone(), &secrets, secrets_group(), 0o640).write(&secrets.path().join("rtsp.toml"));
    let checked = run_to_end("check-config as the service", as_service_user(check_config(&cameras), secrets_group()));
    assert!(checked.status.success(), "{}\n{}", checked.status, checked.stderr);
    assert!(checked.stdout.contains("ok"), "{}", checked.stdout);
    assert!(!checked.stderr.contains("not readable"), "the service reads every secret:\n{}", checked.stderr);

    let config =
        base.camera("front", 2.0, &sample_source("chelsea.png", "loop")).write(&secrets.path().join("config.toml"));
    let mut daemon = RunningDaemon::start_with(&config, &[], |command| {
        *command = as_service_user(std::mem::replace(command, Command::new("true")), secrets_group());
    });
    daemon.wait_until("the daemon to log in to the broker as jetson", || {
        broker.log().lines().any(|line| line.contains("New client connected") && line.contains("u'jetson'"))
    });
    let log = daemon.log_handle();
    // Until its main loop runs, SIGTERM ends a start-up at once (by design): wait for it.
    daemon.wait_until("the daemon to run", || log.text().contains("running:"));
    daemon.signal(libc::SIGTERM);
    let status = daemon.wait_exit();
    assert!(status.success(), "{status}; log:\n{}", daemon.log());
}

#[test]
fn check_config_as_a_user_outside_the_services_group_leaves_the_secrets_to_the_service() {
    if !is_root() {
        eprintln!("skipped: only root can give secret files to a group and run as another user");
        return;
    }
    let broker = Broker::start_secured("jetson", "pass word");
    let secrets = Secrets::new();
    let base = config_with_secrets(&secrets, &broker, "secrets-user", secrets_group(), 0o640);
    let config = with_two_cameras(base, &secrets, secrets_group(), 0o640).write(&secrets.path().join("config.toml"));
    let checked = run_to_end("check-config as a user", as_unprivileged_user(check_config(&config)));
    assert!(checked.status.success(), "the rest of the config is fine: {}\n{}", checked.status, checked.stderr);
    assert!(checked.stdout.contains("ok"), "{}", checked.stdout);
    let mut keys = vec!["mqtt.password_file", "http.token_file"];
    if cfg!(feature = "gstreamer") {
        keys.extend(["camera[0].source.password_file", "camera[1].source.password_file"]);
    }
    for key in keys {
        let note = checked.stderr.lines().find(|line| line.contains(key)).unwrap_or_else(|| {
            panic!("no note on {key}:\n{}", checked.stderr);
        });
        for wanted in ["not readable by user nobody", "as expected", &format!("group {}", secrets_group_name())] {
            assert!(note.contains(wanted), "the note on {key} must say {wanted:?}: {note}");
        }
    }
}

#[test]
fn a_secret_only_root_may_read_fails_check_config_and_run_naming_the_fix() {
    if !is_root() {
        eprintln!("skipped: only root can make a file root's and run as another user");
        return;
    }
    let broker = Broker::start_secured("jetson", "pass word");
    let secrets = Secrets::new();
    let config = config_with_secrets(&secrets, &broker, "secrets-root-only", 0, 0o600)
        .camera("front", 0.0, &sample_source("chelsea.png", "once"))
        .write(&secrets.path().join("config.toml"));
    let password = secrets.path().join("mqtt-password").display().to_string();
    let mut run = daemon_command();
    run.arg("run").arg("--config").arg(&config).env_remove("NOTIFY_SOCKET");
    for (what, command) in [("check-config", check_config(&config)), ("run", run)] {
        let ended = run_to_end(what, as_service_user(command, secrets_group()));
        ended.assert_config_error(
            what,
            &["mqtt.password_file", password.as_str(), "permission denied", "sudo chgrp jetson-detectd"],
        );
    }
}
