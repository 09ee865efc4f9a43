//! A real Home Assistant against the daemon, as a user runs it: Home Assistant 2025.4 (PyPI's
//! `homeassistant` in a venv, `.ci/homeassistant.sh`) with nothing but its MQTT integration, set up
//! through its own HTTP API the way its onboarding page does it — the owner account, a token, the
//! MQTT config flow pointed at the test mosquitto — and read through its REST API (`/api/states`)
//! and its log.
//!
//! Where no Home Assistant is installed the tests print how to get one and pass, except in CI on
//! x86_64 (`CI=true`, [`crate::prerequisite`]), where `.ci/run` installs it and names it in
//! `JETSON_DETECTD_HASS`. Host
//! architecture only: Home Assistant is a host program. It runs with `--skip-pip` (everything it
//! loads is installed up front) and only on loopback. Waits are failure guards ([`Pace`]).

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::broker::Broker;
use crate::daemon::{RunningDaemon, TestConfig};
use crate::http::request;
use crate::pace::Pace;
use crate::prerequisite::skip;

/// The client id Home Assistant's own page uses for its first login (any URL of the instance).
const CLIENT_ID_PATH: &str = "/";

/// Starts of Home Assistant on another port when the one the test found free was taken before
/// Home Assistant bound it.
const HASS_STARTS: usize = 5;

/// What Home Assistant's HTTP server logs once it started (at INFO), and before that when it could
/// not bind its port (an error, after which it runs on without one).
/// (Home Assistant 2025.4.4, the version `.ci/homeassistant.sh` pins.)
const HTTP_STARTED: &str = "Now listening on port";
const HTTP_FAILED: &str = "Failed to create HTTP server at port";

/// A loopback address whose port was free a moment ago.
fn free_address() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0").and_then(|listener| listener.local_addr()).expect("a free port")
}

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
    skip(why);
    None
}

/// One Home Assistant instance with its own configuration directory; killed on drop.
pub struct HomeAssistant {
    hass: PathBuf,
    dir: tempfile::TempDir,
    address: SocketAddr,
    child: Option<Child>,
    token: String,
    /// The log of every earlier run of this instance (each start begins a new file).
    earlier_logs: String,
}

impl HomeAssistant {
    /// Starts Home Assistant, creates its owner account and sets up its MQTT integration against
    /// `broker`, as a user does on the onboarding page and under Settings → Devices → Add MQTT.
    pub fn start(hass: &Path, broker: &Broker) -> HomeAssistant {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut home = HomeAssistant {
            hass: hass.to_path_buf(),
            dir,
            address: free_address(),
            child: None,
            token: String::new(),
            earlier_logs: String::new(),
        };
        home.spawn_until("Home Assistant's onboarding API", |home| home.get_status("/api/onboarding") == Some(200));
        home.token = home.onboard();
        home.set_up_mqtt(broker);
        home
    }

    /// Starts Home Assistant and waits until `ready`. Its port is one the test found free and
    /// released (Home Assistant cannot pick one and say which): when another listener took it
    /// first, Home Assistant logs that its HTTP server failed and runs on without one, so it is
    /// stopped and started again on another port.
    fn spawn_until(&mut self, what: &str, ready: impl Fn(&HomeAssistant) -> bool) {
        for _ in 0..HASS_STARTS {
            self.set_log_aside();
            self.write_configuration();
            self.spawn();
            // Its HTTP server says it listens even when it failed, after saying so.
            self.wait_until(&format!("{what}: its HTTP server"), |home| home.current_log().contains(HTTP_STARTED));
            if !self.current_log().contains(HTTP_FAILED) {
                self.wait_until(what, ready);
                return;
            }
            eprintln!("Home Assistant's port {} was taken before it bound it: starting it again", self.address.port());
            self.stop();
            self.address = free_address();
        }
        panic!("Home Assistant's port was taken at each of {HASS_STARTS} starts; its log:\n{}", self.log());
    }

    /// Its configuration: the current port; location and units given, so that onboarding needs no
    /// network look-up; `api`, `config` and `onboarding` are what its page talks to.
    fn write_configuration(&self) {
        std::fs::write(
            self.dir.path().join("configuration.yaml"),
            format!(
                "homeassistant:\n  name: test\n  latitude: 52.5\n  longitude: 13.4\n  elevation: 0\n  \
                 unit_system: metric\n  time_zone: UTC\n  currency: EUR\n  country: DE\n\
                 http:\n  server_host: 127.0.0.1\n  server_port: {}\n\
                 api:\nconfig:\nonboarding:\n\
                 logger:\n  default: warning\n  logs:\n    homeassistant.components.mqtt: info\n    \
                 homeassistant.components.http: info\n",
                self.address.port()
            ),
        )
        .expect("write configuration.yaml");
    }

    /// Keeps the last run's log and removes its file, so that the next run's is its own from the
    /// start.
    fn set_log_aside(&mut self) {
        self.earlier_logs += &self.current_log();
        let _ = std::fs::remove_file(self.log_path());
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
    /// the same configuration (on another port only if its own was taken meanwhile): its MQTT
    /// integration reconnects and sends its birth message.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn_until("Home Assistant's API after the restart", |home| home.get_status("/api/") == Some(200));
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
    pub fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
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

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("home-assistant.log")
    }

    fn current_log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// Everything Home Assistant logged (warnings and above; its MQTT and HTTP integrations' INFO
    /// lines too), every run of this instance.
    pub fn log(&self) -> String {
        self.earlier_logs.clone() + &self.current_log()
    }

    /// What its MQTT integration said against our messages: warnings and errors that name our
    /// entities (`jetson…`) or topics (under `prefix`) or that come from rendering a template (a
    /// value template on our telemetry), and the complaints it makes at INFO level (a state payload
    /// no mapping matches, a device without a name). Its own connection troubles while the broker
    /// restarts are not about our messages.
    pub fn mqtt_complaints(&self, prefix: &str) -> Vec<String> {
        const INFO_COMPLAINTS: [&str; 2] = ["No matching payload", "always needs to include a name"];
        self.log()
            .lines()
            .filter(|line| {
                let about_us = line.contains("jetson") || line.contains(prefix) || line.contains("emplate");
                let complaint = line.contains(" WARNING ") || line.contains(" ERROR ");
                (about_us && complaint) || INFO_COMPLAINTS.iter().any(|phrase| line.contains(phrase))
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

/// A number, as a sensor's state.
fn numeric(state: &str) -> bool {
    state.parse::<f64>().is_ok()
}

/// What a state must be.
enum Expect {
    Is(&'static str),
    /// Any number.
    Number,
    /// Any value: neither `unavailable` nor `unknown`.
    Known,
    /// Any state at all (an event entity is `unknown` until it first fires).
    Present,
}

impl Expect {
    fn holds(&self, state: &str) -> bool {
        match self {
            Expect::Is(wanted) => state == *wanted,
            Expect::Number => numeric(state),
            Expect::Known => !matches!(state, "unavailable" | "unknown"),
            Expect::Present => true,
        }
    }
}

const DEVICE: &str = "jetson_detectd_hatest";

/// Every entity of the test's daemon, and what it reads while `persons` people are in view and
/// the camera's detection is `detecting`.
fn expected(persons: u32, detecting: bool) -> Vec<(String, Expect)> {
    let count = |n: u32| Expect::Is(["0", "1"][n.min(1) as usize]);
    let on = |on: bool| Expect::Is(if on { "on" } else { "off" });
    let seen = if detecting { persons } else { 0 };
    [
        ("binary_sensor", "online", on(true)),
        ("sensor", "engine", Expect::Is("running")),
        // No engine is built on the CPU backend (issue 46: the build's status while the CPU serves).
        ("sensor", "engine_build", Expect::Is("none")),
        ("sensor", "cpu", Expect::Number),
        ("number", "score_threshold", Expect::Number),
        ("sensor", "front_person_count", count(seen)),
        ("binary_sensor", "front_person_occupied", on(seen > 0)),
        // Whatever else the model sees in the picture counts too.
        ("sensor", "front_all_count", Expect::Number),
        // Fires on the events; which one fired last is checked apart (`wait_for_event`).
        ("event", "front_object", Expect::Present),
        ("switch", "front_detection", on(detecting)),
        ("switch", "front_snapshots", on(true)),
        // No `front_recording`: the camera records no clips (issue 50, item 6).
        ("image", "front_snapshot", Expect::Known),
        ("sensor", "front_fps", Expect::Number),
        ("sensor", "front_dropped_frames", Expect::Number),
        // Nothing is inferred with detection off: no current inference time.
        ("sensor", "front_inference_time", if detecting { Expect::Number } else { Expect::Is("unknown") }),
        ("sensor", "front_yard_count", count(seen)),
        ("sensor", "front_yard_person_count", count(seen)),
        ("binary_sensor", "front_yard_occupied", on(seen > 0)),
        // A zone without labels of its own: a count of `homeassistant.labels` (person), and a
        // total of whatever the model sees there.
        ("sensor", "front_lawn_count", Expect::Number),
        ("sensor", "front_lawn_person_count", count(seen)),
        ("binary_sensor", "front_lawn_occupied", Expect::Known),
    ]
    .into_iter()
    .map(|(domain, object, expect)| (format!("{domain}.{DEVICE}_{object}"), expect))
    .collect()
}

/// Waits (a failure guard of the daemon's pace) until Home Assistant shows every expected entity
/// as expected; panics naming those that are not.
fn wait_for_entities(daemon: &mut RunningDaemon, home: &HomeAssistant, what: &str, expected: &[(String, Expect)]) {
    let mut wrong = Vec::new();
    let log = daemon.log_handle();
    let waited = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        daemon.wait_until(what, || {
            let states = home.states();
            wrong = expected
                .iter()
                .filter(|(entity, expect)| !state_of(&states, entity).is_some_and(|state| expect.holds(&state)))
                .map(|(entity, _)| format!("{entity}: {:?}", state_of(&states, entity)))
                .collect();
            wrong.is_empty()
        });
    }));
    if waited.is_err() {
        panic!("{what}: these entities are not as expected: {wrong:#?}\ndaemon log:\n{}", log.text());
    }
}

/// Waits (a failure guard of the daemon's pace) until the camera's event entity last fired
/// `event_type` for a person; returns the event's attributes.
fn wait_for_event(daemon: &mut RunningDaemon, home: &HomeAssistant, event_type: &str) -> Value {
    let entity = format!("event.{DEVICE}_front_object");
    let mut state = Value::Null;
    let log = daemon.log_handle();
    let waited = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        daemon.wait_until(&format!("Home Assistant's {entity} fired {event_type}"), || {
            state = home.states().get(&entity).cloned().unwrap_or_default();
            state["attributes"]["event_type"] == event_type && state["attributes"]["label"] == "person"
        });
    }));
    if waited.is_err() {
        panic!("{entity} did not fire {event_type}; its state: {state}\ndaemon log:\n{}", log.text());
    }
    let attributes = state["attributes"].clone();
    assert!(attributes["track_id"].is_u64(), "the event names its track: {attributes}");
    attributes
}

/// Calls a Home Assistant service (a switch turned off, a number set), as its UI does.
fn call_service(home: &HomeAssistant, domain: &str, service: &str, data: Value) {
    home.call("POST", &format!("/api/services/{domain}/{service}"), Some(data));
}

/// Replaces the picture the test camera loops over, atomically (the camera reads it per frame).
fn show(view: &Path, sample: &str) {
    let next = view.with_extension("next");
    std::fs::copy(crate::daemon::sample(sample), &next).expect("copy a sample");
    std::fs::rename(&next, view).expect("replace the view");
}

/// The whole life of a Home Assistant user's setup against a real Home Assistant: the daemon's
/// entities appear with values; counts and occupancy follow a person into and out of view, and the
/// camera's event entity fires `end` as the person leaves and `start` as they come back, with the
/// label, the track id and the zones; after a Home Assistant
/// restart and after a broker restart that loses every retained message, every entity is back,
/// available and right; the score threshold is set from Home Assistant; switching detection off
/// ends the counts and stops processing (fps 0, no inference time) with the person still in view
/// while the snapshot goes on, and on again brings them back; the switch survives a restart of the
/// daemon (controls file); and Home Assistant never complains about the daemon's messages. Waits
/// are failure guards of the daemon's measured pace.
#[test]
fn home_assistant_shows_every_entity_right_through_restarts_and_switches() {
    let Some(hass) = installed_hass() else { return };
    let mut broker = Broker::start();
    let mut home = HomeAssistant::start(&hass, &broker);
    let dir = tempfile::tempdir().expect("temp dir");
    let view = dir.path().join("view.jpg");
    show(&view, "person.jpg");
    let no_board = dir.path().join("sysfs");
    std::fs::create_dir(&no_board).expect("sysfs dir");
    // A track survives frames that come slowly on a busy machine (ten frames' time), so the person
    // stays counted while in view, and ends soon after leaving.
    let max_lost = (Pace::measured().frame * 10).max(Duration::from_secs(3));
    let config = TestConfig::new(broker.port(), "ha-entities")
        .set("tracking", "max_lost_s", &format!("{:.1}", max_lost.as_secs_f64()))
        .set("device", "id", "\"hatest\"")
        // Persons only: the model sees a horse in the coffee picture, whose events would take the
        // event entity's last state from the person's.
        .set("model", "classes", "[\"person\"]")
        .set("homeassistant", "discovery", "true")
        .set("snapshot", "enabled", "true")
        .set("snapshot", "interval_s", "1.0")
        .set("telemetry", "interval_s", "1")
        .set("telemetry", "sysfs_root", &format!("{:?}", no_board.display().to_string()))
        .camera("front", 4.0, &crate::daemon::images_source(&view, "loop"))
        .append(
            "[[camera.zone]]\nname = \"yard\"\npolygon = [[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]\n\
             labels = [\"person\"]\n\
             [[camera.zone]]\nname = \"lawn\"\npolygon = [[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]\n",
        )
        .write(&dir.path().join("config.toml"));
    let mut daemon = RunningDaemon::start(&config, &[]);

    wait_for_entities(&mut daemon, &home, "every entity with a person in view", &expected(1, true));
    let ours: Vec<String> = home.states().into_keys().filter(|id| id.contains(DEVICE)).collect();
    assert_eq!(ours.len(), expected(1, true).len(), "exactly the expected entities: {ours:#?}");

    show(&view, "coffee.png");
    wait_for_entities(&mut daemon, &home, "the counts after the person left", &expected(0, true));
    let ended = wait_for_event(&mut daemon, &home, "end");
    show(&view, "person.jpg");
    wait_for_entities(&mut daemon, &home, "the counts after the person came back", &expected(1, true));
    let started = wait_for_event(&mut daemon, &home, "start");
    assert_ne!(started["track_id"], ended["track_id"], "a new track: {started}");
    assert_eq!(started["zones"], json!(["yard", "lawn"]), "the zones the person is in: {started}");
    assert!(started.get("clip_url").is_none(), "no clip without recording and http.public_url: {started}");

    home.restart();
    wait_for_entities(&mut daemon, &home, "every entity after Home Assistant's restart", &expected(1, true));

    broker.restart_forgetting();
    wait_for_entities(&mut daemon, &home, "every entity after the broker lost everything", &expected(1, true));

    let threshold = format!("number.{DEVICE}_score_threshold");
    call_service(&home, "number", "set_value", json!({"entity_id": threshold, "value": 0.45}));
    let mut with_threshold = expected(1, true);
    with_threshold.retain(|(entity, _)| *entity != threshold);
    with_threshold.push((threshold.clone(), Expect::Is("0.45")));
    wait_for_entities(&mut daemon, &home, "the threshold set from Home Assistant", &with_threshold);

    let detection = format!("switch.{DEVICE}_front_detection");
    call_service(&home, "switch", "turn_off", json!({"entity_id": detection}));
    let mut stopped = expected(1, false);
    stopped.push((format!("sensor.{DEVICE}_front_fps"), Expect::Is("0.0")));
    stopped.retain(|(entity, expect)| !entity.ends_with("_fps") || matches!(expect, Expect::Is(_)));
    wait_for_entities(&mut daemon, &home, "no counts and no frames with detection off", &stopped);

    // The switch is kept across a restart of the daemon.
    daemon.signal(libc::SIGTERM);
    assert!(daemon.wait_exit().success(), "a clean stop");
    let mut daemon = RunningDaemon::start(&config, &[]);
    wait_for_entities(&mut daemon, &home, "detection still off after the daemon's restart", &expected(1, false));
    // The picture goes on with detection off: the snapshot image keeps changing.
    let image = format!("image.{DEVICE}_front_snapshot");
    let shown = state_of(&home.states(), &image);
    daemon.wait_until("a new snapshot with detection off", || state_of(&home.states(), &image) != shown);

    call_service(&home, "switch", "turn_on", json!({"entity_id": detection}));
    wait_for_entities(&mut daemon, &home, "the person counted again with detection on", &expected(1, true));

    assert_eq!(
        home.mqtt_complaints("ha-entities"),
        Vec::<String>::new(),
        "Home Assistant complained about our messages"
    );
}
