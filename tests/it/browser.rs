//! The page in a real browser: Debian's headless Chromium, driven over W3C WebDriver by
//! `chromedriver` (plain JSON over HTTP, spoken with the raw client of [`crate::http`]), against
//! the real daemon and a real mosquitto broker. The page loads, shows every camera's picture and its
//! configured zone, a zone drawn with the editor (four clicks on the picture, a name, a label,
//! Finish) is saved, and the next events carry it, pushed to the page as they happen. At 1400 × 1000 (issue 33) the cameras stand in a
//! grid with their figures and editors in view and the recent events beside them, and a zone is
//! deleted only once the user confirms it. With motion gating on (every frame still detected: the
//! floor rate is above the cameras'), ticking *motion* draws the regions the back camera's gate
//! sees as its pattern moves, and a mask drawn with the editor (three clicks, Finish) is saved.
//!
//! Skipped, saying what to install, where `chromium` or `chromedriver` is missing, except with
//! `CI=true`, where it fails ([`crate::prerequisite`]: `.ci/run` installs both). Host architecture only: the browser is a
//! host tool, and the page's bytes are the same on every architecture.
//! `JETSON_DETECTD_SCREENSHOT=FILE` saves a PNG of the page after the zone is saved.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::announced::announced;
use crate::broker::{Broker, Subscriber};
use crate::daemon::{sample_source, RunningDaemon, TestConfig};
use crate::http::request;
use crate::pace::Pace;
use crate::prerequisite::{or_skip, runs};
use jetson_detectd::publish::event_message::EventMessage;

/// A chromedriver process; killed on drop.
pub(crate) struct Driver {
    child: Child,
    address: SocketAddr,
    session: Option<String>,
}

/// `Ok` where headless Chromium and chromedriver both run, else what to install.
pub(crate) fn chromium() -> Result<(), String> {
    if runs("chromium", "--version") && runs("chromedriver", "--version") {
        Ok(())
    } else {
        Err("no chromium or chromedriver (apt-get install chromium chromium-driver)".into())
    }
}

impl Driver {
    /// Starts chromedriver on a port it picks itself (`--port=0`) and reads the port from the line
    /// it prints once it listens: a port the test picked could be taken by another test's daemon or
    /// broker before chromedriver binds it, and the test would then talk WebDriver to that.
    pub(crate) fn start() -> Driver {
        let mut child = Command::new("chromedriver")
            .arg("--port=0")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let stdout = child.stdout.take().expect("chromedriver's stdout");
        let port = announced(&mut child, "chromedriver", stdout, "started successfully on port ", |rest| {
            rest.trim_end_matches('.').trim().parse::<u16>().ok()
        });
        Driver { child, address: ([127, 0, 0, 1], port).into(), session: None }
    }

    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let headers: &[(&str, &str)] = if body.is_empty() { &[] } else { &[("Content-Type", "application/json")] };
        let answer = request(self.address, method, path, headers, body.as_bytes());
        let value = answer.json();
        assert_eq!(answer.status, 200, "WebDriver {method} {path}: {value}");
        value["value"].clone()
    }

    pub(crate) fn new_session(&mut self, profile: &Path) {
        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--window-size=1400,1000",
            &format!("--user-data-dir={}", profile.display()),
        ];
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": "/usr/bin/chromium", "args": args}
        }}});
        let value = self.call("POST", "/session", Some(capabilities));
        self.session = Some(value["sessionId"].as_str().expect("sessionId").to_string());
    }

    fn session_path(&self, rest: &str) -> String {
        format!("/session/{}/{rest}", self.session.as_deref().expect("a session"))
    }

    pub(crate) fn go(&self, url: &str) {
        self.call("POST", &self.session_path("url"), Some(json!({ "url": url })));
    }

    pub(crate) fn script(&self, script: &str) -> Value {
        self.call("POST", &self.session_path("execute/sync"), Some(json!({ "script": script, "args": [] })))
    }

    fn element(&self, css: &str) -> String {
        let value =
            self.call("POST", &self.session_path("element"), Some(json!({"using": "css selector", "value": css})));
        value.as_object().and_then(|o| o.values().next()).and_then(Value::as_str).expect("element id").to_string()
    }

    pub(crate) fn click(&self, css: &str) {
        let id = self.element(css);
        self.call("POST", &self.session_path(&format!("element/{id}/click")), Some(json!({})));
    }

    fn type_into(&self, css: &str, text: &str) {
        let id = self.element(css);
        self.call("POST", &self.session_path(&format!("element/{id}/value")), Some(json!({ "text": text })));
    }

    /// Clicks at offsets (pixels) from the centre of the element `css`.
    fn click_at(&self, css: &str, x: i64, y: i64) {
        let id = self.element(css);
        let origin = json!({ "element-6066-11e4-a52e-4f735466cecf": id });
        let actions = json!({"actions": [{"type": "pointer", "id": "mouse", "parameters": {"pointerType": "mouse"},
        "actions": [
            {"type": "pointerMove", "duration": 0, "origin": origin, "x": x, "y": y},
            {"type": "pointerDown", "button": 0},
            {"type": "pointerUp", "button": 0}
        ]}]});
        self.call("POST", &self.session_path("actions"), Some(actions));
    }

    /// The text of the open user prompt (`window.confirm`), or `None` when there is none.
    fn prompt_text(&self) -> Option<String> {
        let answer = request(self.address, "GET", &self.session_path("alert/text"), &[], &[]);
        (answer.status == 200).then(|| answer.json()["value"].as_str().unwrap_or_default().to_string())
    }

    /// Answers the open user prompt: OK (`accept`) or Cancel (`dismiss`).
    pub(crate) fn answer_prompt(&self, answer: &str) {
        self.call("POST", &self.session_path(&format!("alert/{answer}")), Some(json!({})));
    }

    fn screenshot(&self) -> Vec<u8> {
        let value = self.call("GET", &self.session_path("screenshot"), None);
        base64_decode(value.as_str().expect("base64 PNG"))
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if let Some(session) = self.session.take() {
            let _ = request(self.address, "DELETE", &format!("/session/{session}"), &[], &[]);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => u32::from(c - b'A'),
            b'a'..=b'z' => u32::from(c - b'a') + 26,
            b'0'..=b'9' => u32::from(c - b'0') + 52,
            b'+' => 62,
            b'/' => 63,
            other => panic!("not base64: {other}"),
        }
    };
    let clean: Vec<u8> = text.bytes().filter(|c| !c.is_ascii_whitespace() && *c != b'=').collect();
    let mut out = Vec::with_capacity(clean.len() * 3 / 4);
    for chunk in clean.chunks(4) {
        let n = chunk.iter().enumerate().fold(0u32, |acc, (i, c)| acc | value(*c) << (18 - 6 * i));
        out.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
    }
    out
}

/// Polls a script until it returns `true`, for as long as [`RunningDaemon::wait_until`] would wait.
/// A timeout says what the page showed then (the daemon's log follows, from its guard's drop).
pub(crate) fn wait_for(daemon: &mut RunningDaemon, driver: &Driver, what: &str, script: &str) {
    let deadline = Instant::now() + Pace::measured().daemon_wait();
    while driver.script(script) != Value::Bool(true) {
        assert!(daemon.is_running(), "the daemon exited while the page waited for {what}");
        if Instant::now() >= deadline {
            let page = driver.script("return document.body.innerText;");
            panic!("timed out waiting for {what}; the page showed:\n{}", page.as_str().unwrap_or_default());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_page_shows_every_camera_and_a_zone_drawn_in_the_browser_is_in_the_next_events() {
    if or_skip(chromium()).is_none() {
        return;
    }
    let broker = Broker::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let prefix = "browser";
    let subscriber = Subscriber::connect(&broker, "browser-sub", &[&format!("{prefix}/#")]);
    let config = TestConfig::new(broker.port(), prefix)
        .set("http", "listen", "\"127.0.0.1:0\"")
        .set("http", "zones_file", &format!("{:?}", dir.path().join("zones.toml").display().to_string()))
        .set("tracking", "stationary_s", "3600.0")
        .set("motion", "enabled", "true")
        .set("motion", "detect_interval_s", "0.1")
        .camera("front", 4.0, &sample_source("dog.jpg", "loop"))
        .camera("back", 4.0, "{ kind = \"synthetic\", width = 320, height = 240 }")
        .append("[[camera.zone]]\nname = \"doorway\"\npolygon = [[0.1, 0.1], [0.5, 0.1], [0.5, 0.9], [0.1, 0.9]]\n")
        .write(&dir.path().join("config.toml"));
    let mut daemon = RunningDaemon::start(&config, &[]);
    let log = daemon.log_handle();
    let mut address = None;
    daemon.wait_until("the page's address", || {
        address = log.text().lines().find_map(|line| {
            line.split("the page is on ").nth(1).and_then(|rest| rest.split_whitespace().next()).map(str::to_string)
        });
        address.is_some()
    });
    let url = address.expect("waited for it");

    let mut driver = Driver::start();
    driver.new_session(&dir.path().join("profile"));
    driver.go(&url);
    wait_for(
        &mut daemon,
        &driver,
        "both cameras' pictures",
        "const imgs = [...document.querySelectorAll('section.camera img.live')];
         return imgs.length === 2 && imgs.every((img) => Number(img.dataset.frames) > 1);",
    );
    wait_for(
        &mut daemon,
        &driver,
        "the configured zone drawn on the back camera",
        "return !!document.querySelector('section.camera[data-camera=\"back\"] svg polygon.zone[data-name=\"doorway\"]');",
    );
    wait_for(
        &mut daemon,
        &driver,
        "the status badge",
        "return document.getElementById('health').textContent === 'healthy';",
    );
    // The header names the models that run, each camera's figures its own (issue 50, item 4).
    wait_for(
        &mut daemon,
        &driver,
        "the model in the header and in each camera's figures",
        "const model = 'ssd_mobilenet_v2_coco_prenms_fp32.onnx';
         const figures = [...document.querySelectorAll('section.camera .figures')];
         return document.getElementById('summary').textContent.includes(model)
           && figures.length === 2 && figures.every((f) => f.textContent.startsWith(model + ' · '));",
    );

    // Draw a zone over almost all of the front picture: four corners, a name, a label.
    let card = "section.camera[data-camera=\"front\"]";
    driver.click(&format!("{card} button.draw-zone"));
    let size = driver.script(&format!(
        "const r = document.querySelector('{card} svg.overlay').getBoundingClientRect(); return [r.width, r.height];"
    ));
    let (w, h) = (size[0].as_f64().expect("width") * 0.45, size[1].as_f64().expect("height") * 0.45);
    for (x, y) in [(-w, -h), (w, -h), (w, h), (-w, h)] {
        driver.click_at(&format!("{card} svg.overlay"), x as i64, y as i64);
    }
    driver.type_into(&format!("{card} input.name"), "drawn");
    driver.type_into(&format!("{card} input.labels"), "dog");
    driver.click(&format!("{card} button.finish"));
    wait_for(
        &mut daemon,
        &driver,
        "the drawn zone saved and shown",
        &format!(
            "return document.querySelector('{card} .message').textContent === 'saved' &&
                    !!document.querySelector('{card} svg polygon.zone[data-name=\"drawn\"]');"
        ),
    );
    let saved = std::fs::read_to_string(dir.path().join("zones.toml")).expect("the zones file");
    assert!(saved.contains("name = \"drawn\""), "{saved}");

    let topic = format!("{prefix}/front/events");
    daemon.wait_for_messages(&subscriber, &topic, "an event in the drawn zone", |messages| {
        messages.iter().any(|m| serde_json::from_slice::<EventMessage>(&m.payload).is_ok_and(|e| e.zones == ["drawn"]))
    });
    // Pushed as it happened: the page read the kept events once, when its stream opened, and
    // polls nothing.
    wait_for(
        &mut daemon,
        &driver,
        "the event in the page's list",
        "return [...document.querySelectorAll('#events li')].some((li) => / (entered|appeared in) drawn/.test(li.textContent));",
    );
    let reads = driver.script(
        "return performance.getEntriesByType('resource').filter((r) => r.name.includes('/api/events?')).length;",
    );
    assert_eq!(reads, Value::from(1), "the events were read once, then pushed");
    let newest = driver.script("return document.querySelector('#events li').textContent;");
    assert!(
        newest.as_str().is_some_and(|line| !line.contains("update") && !line.contains('Z')),
        "a sentence in local time, newest first: {newest}"
    );
    // The label filter keeps that label's events only; back to every label for what follows.
    let only_dogs = driver.script(
        "const select = document.getElementById('filter-label');
         const pick = (value) => { select.value = value; select.dispatchEvent(new Event('change')); };
         pick('dog');
         const items = [...document.querySelectorAll('#events li')].map((li) => li.textContent);
         pick('');
         return items.length > 0 && items.every((text) => text.includes(': dog #'));",
    );
    assert_eq!(only_dogs, Value::Bool(true), "the label filter");
    motion_is_drawn_and_a_mask_is_saved(&mut daemon, &driver, dir.path());
    if let Some(path) = std::env::var_os("JETSON_DETECTD_SCREENSHOT") {
        std::fs::write(&path, driver.screenshot()).expect("write the screenshot");
    }

    // The layout at 1400 × 1000: both cameras side by side, each with its picture, figures and
    // editor above the fold, and the recent events in a column of their own to their right.
    let layout = driver.script(
        "const r = (e) => e.getBoundingClientRect();
         const cards = [...document.querySelectorAll('section.camera')];
         const panel = r(document.getElementById('events-panel'));
         return {
           height: window.innerHeight,
           width: window.innerWidth,
           cards: cards.map((card) => ({
             top: r(card).top, right: r(card).right,
             picture: r(card.querySelector('img.live')).bottom,
             figures: r(card.querySelector('.figures')).bottom,
             editor: r(card.querySelector('.editor')).bottom,
             overlay: [r(card.querySelector('svg.overlay')).width, r(card.querySelector('img.live')).width],
           })),
           events: { left: panel.left, top: panel.top, items: document.querySelectorAll('#events li').length },
         };",
    );
    let number = |value: &Value| value.as_f64().unwrap_or(f64::NAN);
    let (height, width) = (number(&layout["height"]), number(&layout["width"]));
    assert!(width >= 1300.0, "the window is 1400 wide: {layout}");
    let cards = layout["cards"].as_array().expect("cards");
    assert_eq!(cards.len(), 2, "{layout}");
    assert!((number(&cards[0]["top"]) - number(&cards[1]["top"])).abs() < 1.0, "cameras side by side: {layout}");
    for card in cards {
        for part in ["picture", "figures", "editor"] {
            assert!(number(&card[part]) <= height, "a camera's {part} is below the fold: {layout}");
        }
        let [overlay, picture] = [&card["overlay"][0], &card["overlay"][1]].map(number);
        assert!((overlay - picture).abs() < 1.0, "the overlay covers the picture exactly: {layout}");
        assert!(number(&card["right"]) <= number(&layout["events"]["left"]), "events beside the cameras: {layout}");
    }
    assert!(number(&layout["events"]["top"]) < height / 4.0, "the events start at the top: {layout}");
    assert!(layout["events"]["items"].as_u64().unwrap_or(0) > 0, "{layout}");

    // Deleting a zone asks first: Cancel keeps it, OK deletes it.
    let doorway = "section.camera[data-camera=\"back\"] ul.scene li button";
    driver.click(doorway);
    let question = driver.prompt_text().expect("delete asks for confirmation");
    assert!(question.contains("doorway"), "{question}");
    driver.answer_prompt("dismiss");
    assert!(
        driver.script("return !!document.querySelector('section.camera[data-camera=\"back\"] svg polygon.zone[data-name=\"doorway\"]');")
            == Value::Bool(true),
        "Cancel keeps the zone"
    );
    driver.click(doorway);
    driver.answer_prompt("accept");
    wait_for(
        &mut daemon,
        &driver,
        "the confirmed delete saved",
        "return !document.querySelector('section.camera[data-camera=\"back\"] svg polygon.zone[data-name=\"doorway\"]');",
    );
}

/// The motion debug view and the mask editor: ticking *motion* on the back camera (its synthetic
/// pattern moves) draws its gate's regions and says its state; a mask drawn on the front picture
/// (three corners, Finish) is saved to the zones file and drawn.
fn motion_is_drawn_and_a_mask_is_saved(daemon: &mut RunningDaemon, driver: &Driver, dir: &Path) {
    let back = "section.camera[data-camera=\"back\"]";
    driver.click(&format!("{back} input.show-motion"));
    wait_for(
        daemon,
        driver,
        "the back camera's motion regions",
        &format!(
            "const layer = document.querySelector('{back} svg.motion');
             return !layer.hasAttribute('hidden') && layer.querySelectorAll('rect.region').length > 0
               && document.querySelector('{back} .motion-state').textContent.startsWith('motion: moving');"
        ),
    );
    driver.click(&format!("{back} input.show-motion"));
    let cleared = driver.script(&format!("return document.querySelectorAll('{back} svg.motion rect').length;"));
    assert_eq!(cleared, Value::from(0), "unticked, the regions go");

    let front = "section.camera[data-camera=\"front\"]";
    driver.click(&format!("{front} button.draw-mask"));
    for (x, y) in [(-40, -40), (40, -40), (0, 40)] {
        driver.click_at(&format!("{front} svg.overlay"), x, y);
    }
    driver.click(&format!("{front} button.finish"));
    wait_for(
        daemon,
        driver,
        "the drawn mask saved and shown",
        &format!(
            "return document.querySelector('{front} .message').textContent === 'saved' &&
                    document.querySelectorAll('{front} svg polygon.mask').length === 1;"
        ),
    );
    let saved = std::fs::read_to_string(dir.join("zones.toml")).expect("the zones file");
    assert!(saved.contains("masks = [["), "{saved}");
}
