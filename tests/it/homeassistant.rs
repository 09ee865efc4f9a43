//! A real Home Assistant against the daemon, as a user runs it: Home Assistant 2025.4 (PyPI's
//! `homeassistant` in a venv, `.ci/homeassistant.sh`) with nothing but its MQTT integration, set up
//! through its own HTTP API the way its onboarding page does it — the owner account, a token, the
//! MQTT config flow pointed at the test mosquitto — and read through its REST API (`/api/states`)
//! and its log.
//!
//! Where no Home Assistant is installed the tests print how to get one and pass, except in CI on
//! x86_64 (`CI=true`), where `.ci/run` installs it and names it in `JETSON_DETECTD_HASS`. Host
//! architecture only: Home Assistant is a host program. It runs with `--skip-pip` (everything it
//! loads is installed up front) and only on loopback. Waits are failure guards ([`Pace`]).

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::broker::Broker;
use crate::daemon::{sample_source, RunningDaemon, TestConfig};
use crate::http::request;
use crate::pace::Pace;

/// The client id Home Assistant's own page uses for its first login (any URL of the instance).
const CLIENT_ID_PATH: &str = "/";

/// The `hass` program of the test venv: `JETSON_DETECTD_HASS`, else `.ci/homeassistant.sh`'s
/// place in the target directory of this test binary. `None` (said on stderr) when neither exists.
pub fn installed_hass() -> Option<PathBuf> {
    let from_env = std::env::var_os("JETSON_DETECTD_HASS").map(PathBuf::from);
    // target/<profile>/deps/it-<hash> → target/homeassistant-venv/bin/hass
    let beside_target = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.parent()?.join("homeassistant-venv/bin/hass")));
    if let Some(hass) = from_env.or(beside_target).filter(|hass| hass.is_file()) {
        return Some(hass);
    }
    let why =
        "no Home Assistant: run `bash .ci/homeassistant.sh` (installs it under target/) or set JETSON_DETECTD_HASS";
    assert!(std::env::var("CI").as_deref() != Ok("true"), "{why}; CI must run the Home Assistant tests");
    eprintln!("skipped: {why}");
    None
}

/// One Home Assistant instance with its own configuration directory; killed on drop.
pub struct HomeAssistant {
    hass: PathBuf,
    dir: tempfile::TempDir,
    address: SocketAddr,
    child: Option<Child>,
    token: String,
    /// The log of every earlier run of this instance (each start rotates the file).
    earlier_logs: String,
}

impl HomeAssistant {
    /// Starts Home Assistant, creates its owner account and sets up its MQTT integration against
    /// `broker`, as a user does on the onboarding page and under Settings → Devices → Add MQTT.
    pub fn start(hass: &Path, broker: &Broker) -> HomeAssistant {
        let dir = tempfile::tempdir().expect("temp dir");
        let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
        let address = SocketAddr::from(([127, 0, 0, 1], port));
        // Location and units given, so that onboarding needs no network look-up; `api`, `config`
        // and `onboarding` are what its page talks to.
        std::fs::write(
            dir.path().join("configuration.yaml"),
            format!(
                "homeassistant:\n  name: test\n  latitude: 52.5\n  longitude: 13.4\n  elevation: 0\n  \
                 unit_system: metric\n  time_zone: UTC\n  currency: EUR\n  country: DE\n\
                 http:\n  server_host: 127.0.0.1\n  server_port: {port}\n\
                 api:\nconfig:\nonboarding:\n\
                 logger:\n  default: warning\n  logs:\n    homeassistant.components.mqtt: info\n"
            ),
        )
        .expect("write configuration.yaml");
        let mut home = HomeAssistant {
            hass: hass.to_path_buf(),
            dir,
            address,
            child: None,
            token: String::new(),
            earlier_logs: String::new(),
        };
        home.spawn();
        home.wait_until("Home Assistant's onboarding API", |home| home.get_status("/api/onboarding") == Some(200));
        home.token = home.onboard();
        home.set_up_mqtt(broker);
        home
    }

    fn spawn(&mut self) {
        let child = Command::new(&self.hass)
            .arg("--config")
            .arg(self.dir.path())
            .arg("--skip-pip")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", self.hass.display()));
        self.child = Some(child);
    }

    /// Stops Home Assistant (SIGTERM, as systemd or `ha core restart` do) and starts it again with
    /// the same configuration: its MQTT integration reconnects and sends its birth message.
    pub fn restart(&mut self) {
        self.stop();
        self.earlier_logs += &self.current_log();
        self.spawn();
        self.wait_until("Home Assistant's API after the restart", |home| home.get_status("/api/") == Some(200));
    }

    fn stop(&mut self) {
        let Some(mut child) = self.child.take() else { return };
        let pid = libc::pid_t::try_from(child.id()).expect("pid fits pid_t");
        // SAFETY: kill has no memory-safety preconditions; the pid is our own child, not yet reaped.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let deadline = Instant::now() + Self::start_wait();
        while matches!(child.try_wait(), Ok(None)) {
            if Instant::now() > deadline {
                let _ = child.kill();
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Failure guard for Home Assistant's start-up: it loads its default integrations (about ten
    /// seconds on an idle 2-core machine), slower when the other tests load the machine.
    fn start_wait() -> Duration {
        Pace::measured().daemon_wait() * 2
    }

    fn wait_until(&mut self, what: &str, done: impl Fn(&HomeAssistant) -> bool) {
        let deadline = Instant::now() + Self::start_wait();
        while !done(self) {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                panic!("Home Assistant exited ({status}) while waiting for {what}; its log:\n{}", self.log());
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}; Home Assistant's log:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The status of a GET, `None` while nothing listens.
    fn get_status(&self, path: &str) -> Option<u16> {
        TcpStream::connect(self.address).ok()?;
        let bearer = format!("Bearer {}", self.token);
        let headers: &[(&str, &str)] = if self.token.is_empty() { &[] } else { &[("Authorization", &bearer)] };
        Some(request(self.address, "GET", path, headers, &[]).status)
    }

    /// An authorised API call with a JSON body (POST) or none (GET); the JSON answer.
    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let bearer = format!("Bearer {}", self.token);
        let body = body.map(|body| body.to_string()).unwrap_or_default();
        let headers = [("Authorization", bearer.as_str()), ("Content-Type", "application/json")];
        let answer = request(self.address, method, path, &headers, body.as_bytes());
        assert_eq!(answer.status, 200, "{method} {path}: {}", answer.text());
        answer.json()
    }

    /// The onboarding page's first step: the owner account; then the token its login gives.
    fn onboard(&self) -> String {
        let client_id = format!("http://{}{CLIENT_ID_PATH}", self.address);
        let user = json!({"client_id": client_id, "name": "Test", "username": "test",
                          "password": "test-password", "language": "en"});
        let answer = request(
            self.address,
            "POST",
            "/api/onboarding/users",
            &[("Content-Type", "application/json")],
            user.to_string().as_bytes(),
        );
        assert_eq!(answer.status, 200, "onboarding: {}", answer.text());
        let code = answer.json()["auth_code"].as_str().expect("auth_code").to_string();
        let form = format!("grant_type=authorization_code&code={code}&client_id={client_id}");
        let answer = request(
            self.address,
            "POST",
            "/auth/token",
            &[("Content-Type", "application/x-www-form-urlencoded")],
            form.as_bytes(),
        );
        assert_eq!(answer.status, 200, "token: {}", answer.text());
        answer.json()["access_token"].as_str().expect("access_token").to_string()
    }

    /// The MQTT integration's config flow, as its dialog runs it: broker and port, defaults else
    /// (discovery on under `homeassistant/`, birth message `online` on `homeassistant/status`).
    fn set_up_mqtt(&self, broker: &Broker) {
        let flow = self.call("POST", "/api/config/config_entries/flow", Some(json!({"handler": "mqtt"})));
        assert_eq!(flow["step_id"], "broker", "{flow}");
        let flow_id = flow["flow_id"].as_str().expect("flow_id");
        let done = self.call(
            "POST",
            &format!("/api/config/config_entries/flow/{flow_id}"),
            Some(json!({"broker": broker.host(), "port": broker.port()})),
        );
        assert_eq!(done["type"], "create_entry", "{done}");
        assert_eq!(done["result"]["state"], "loaded", "{done}");
    }

    /// Every entity's state object (`state`, `attributes`, …) by entity id.
    pub fn states(&self) -> BTreeMap<String, Value> {
        let Value::Array(states) = self.call("GET", "/api/states", None) else { panic!("/api/states is a list") };
        states.into_iter().map(|state| (state["entity_id"].as_str().unwrap_or_default().to_string(), state)).collect()
    }

    fn current_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("home-assistant.log")).unwrap_or_default()
    }

    /// Everything Home Assistant logged (at warning and above), every run of this instance.
    pub fn log(&self) -> String {
        self.earlier_logs.clone() + &self.current_log()
    }

    /// What its MQTT integration said against our messages: its warnings and errors (discovery,
    /// payloads, templates) and those about our entities, and the complaints it makes at INFO
    /// level (a state payload no mapping matches, a device without a name).
    pub fn mqtt_complaints(&self) -> Vec<String> {
        const INFO_COMPLAINTS: [&str; 2] = ["No matching payload", "always needs to include a name"];
        self.log()
            .lines()
            .filter(|line| {
                let ours = line.contains("[homeassistant.components.mqtt") || line.contains("jetson");
                let complaint = line.contains(" WARNING ")
                    || line.contains(" ERROR ")
                    || INFO_COMPLAINTS.iter().any(|complaint| line.contains(complaint));
                ours && complaint
            })
            .map(str::to_string)
            .collect()
    }
}

impl Drop for HomeAssistant {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            eprintln!("---- Home Assistant log ----\n{}", self.log());
        }
    }
}

/// The state of `entity_id`, `None` while Home Assistant has no such entity.
fn state_of(states: &BTreeMap<String, Value>, entity_id: &str) -> Option<String> {
    Some(states.get(entity_id)?["state"].as_str()?.to_string())
}

#[test]
fn home_assistant_set_up_through_its_api_shows_the_daemons_entities_with_their_values() {
    let Some(hass) = installed_hass() else { return };
    let broker = Broker::start();
    let mut home = HomeAssistant::start(&hass, &broker);
    let dir = tempfile::tempdir().expect("temp dir");
    let config = TestConfig::new(broker.port(), "ha-entities")
        .set("device", "id", "\"hatest\"")
        .set("homeassistant", "discovery", "true")
        .camera("front", 4.0, &sample_source("person.jpg", "loop"))
        .append(
            "[[camera.zone]]\nname = \"yard\"\npolygon = [[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]\n\
             labels = [\"person\"]\n",
        )
        .write(&dir.path().join("config.toml"));
    let mut daemon = RunningDaemon::start(&config, &[]);

    let expected = [
        ("binary_sensor.jetson_detectd_hatest_daemon_online", "on"),
        ("sensor.jetson_detectd_hatest_front_person_count", "1"),
        ("sensor.jetson_detectd_hatest_front_yard_person_count", "1"),
        ("binary_sensor.jetson_detectd_hatest_front_yard_occupied", "on"),
    ];
    let all_shown = |home: &HomeAssistant| {
        let states = home.states();
        expected.iter().all(|(entity, value)| state_of(&states, entity).as_deref() == Some(*value))
    };
    daemon.wait_until("Home Assistant to show the person in view", || all_shown(&home));
    let states = home.states();
    let ours: Vec<&String> = states.keys().filter(|id| id.contains("jetson_detectd")).collect();
    assert_eq!(ours.len(), expected.len(), "entities: {ours:?}");

    home.restart();
    daemon.wait_until("every entity back after Home Assistant's restart", || all_shown(&home));
    assert_eq!(home.mqtt_complaints(), Vec::<String>::new(), "Home Assistant complained about our messages");
}
