//! What a user sees when the broker is not what the config expects (issue 50, item 3), against a
//! real mosquitto that wants a login over TLS:
//!
//! - A refused login is logged naming the user, `mqtt.username` and the password file, and
//!   `probe` logs in as the daemon would and says the same, or that the broker accepted it.
//! - A daemon that never reached its broker stops its MQTT outlet at once on SIGINT: no wait for
//!   the flush window, no word of unacknowledged messages or a Last Will, no retry after it.

use std::net::TcpListener;
use std::path::Path;

use crate::arch::daemon_command;
use crate::broker::Broker;
use crate::daemon::{sample_source, toml_string, RunningDaemon, TestConfig};

/// A config for `broker` (TLS, user `jetson`) with `password` in a file in `dir`.
fn secured_config(broker: &Broker, dir: &Path, prefix: &str, password: &str) -> std::path::PathBuf {
    let password_file = dir.join("mqtt-password");
    std::fs::write(&password_file, format!("{password}\n")).expect("write the password file");
    TestConfig::new(broker.port(), prefix)
        .set("mqtt", "username", "\"jetson\"")
        .set("mqtt", "password_file", &toml_string(&password_file.display().to_string()))
        .set("mqtt", "tls", &format!("{{ ca_file = {} }}", toml_string(&broker.ca_file().display().to_string())))
        .camera("front", 2.0, &sample_source("chelsea.png", "loop"))
        .write(&dir.join("config.toml"))
}

/// `probe`'s `broker` section for `config`.
fn probe_broker(config: &Path) -> serde_json::Value {
    let output = daemon_command().args(["probe", "--config"]).arg(config).output().expect("run probe");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("probe prints JSON");
    report["broker"].clone()
}

#[test]
fn a_refused_broker_login_names_the_user_and_the_password_file_in_the_log_and_in_probe() {
    let broker = Broker::start_secured("jetson", "pass word");
    let dir = tempfile::tempdir().expect("tempdir");
    let config = secured_config(&broker, dir.path(), "login-refused", "not the password");
    let password_file = dir.path().join("mqtt-password").display().to_string();
    let wanted = ["refused the login of user \"jetson\"", "`mqtt.username`", "`mqtt.password_file`"];

    let mut daemon = RunningDaemon::start(&config, &[]);
    let log = daemon.log_handle();
    daemon.wait_until("the refused login in the log", || log.text().contains("refused the login"));
    let line = log.text().lines().find(|line| line.contains("refused the login")).unwrap_or_default().to_owned();
    for words in wanted.iter().copied().chain([password_file.as_str()]) {
        assert!(line.contains(words), "the line must say {words:?}: {line}");
    }
    assert!(!log.text().contains("not the password"), "the password shows in the log:\n{}", log.text());
    daemon.signal(libc::SIGTERM);
    daemon.wait_exit();

    let refused = probe_broker(&config);
    assert_eq!((&refused["reachable"], &refused["logged_in"]), (&true.into(), &false.into()), "{refused}");
    let detail = refused["detail"].as_str().unwrap_or_default();
    for words in wanted {
        assert!(detail.contains(words), "probe must say {words:?}: {refused}");
    }

    let config = secured_config(&broker, dir.path(), "login-accepted", "pass word");
    let accepted = probe_broker(&config);
    assert_eq!((&accepted["reachable"], &accepted["logged_in"]), (&true.into(), &true.into()), "{accepted}");
    assert!(
        accepted["detail"].as_str().is_some_and(|d| d.contains("accepted the login of user \"jetson\"")),
        "{accepted}"
    );
}

#[test]
fn a_daemon_that_never_reached_its_broker_stops_at_once_on_sigint_and_says_what_was_not_sent() {
    let closed = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
    let dir = tempfile::tempdir().expect("tempdir");
    let config = TestConfig::new(closed, "login-never")
        .set("mqtt", "shutdown_flush_ms", "60000")
        .camera("front", 2.0, &sample_source("chelsea.png", "loop"))
        .write(&dir.path().join("config.toml"));
    let mut daemon = RunningDaemon::start(&config, &[]);
    let log = daemon.log_handle();
    daemon.wait_until("the daemon to run and fail to connect", || {
        let text = log.text();
        text.contains("running:") && text.contains("cannot connect")
    });
    daemon.signal(libc::SIGINT);
    let status = daemon.wait_exit();
    let text = daemon.log();
    assert!(status.success(), "{status}; log:\n{text}");
    let after = &text[text.find("SIGINT").unwrap_or_else(|| panic!("no SIGINT in the log:\n{text}"))..];
    for stale in ["Last Will", "not acknowledged", "cannot connect"] {
        assert!(!after.contains(stale), "after SIGINT the log says {stale:?}:\n{text}");
    }
    // The outlet stops at once when the daemon shuts it down (the cameras and the recorder stop
    // first, and the connection task keeps trying to deliver meanwhile): nothing after that.
    let stopped = after.find("without ever having reached").unwrap_or_else(|| {
        panic!("the stop says why it is at once:\n{text}");
    });
    let rest = after[stopped..].lines().skip(1).collect::<Vec<_>>();
    assert!(!rest.iter().any(|line| line.contains("MQTT")), "MQTT lines after the stop:\n{text}");
}
