//! The HTTP stage against the real daemon (CPU backend, bundled model and samples, a real mosquitto
//! broker): the page and its assets, the API, `/metrics` read by a strict OpenMetrics parser, the
//! write checks (token, origin, body bound, zone validation), a zone saved through the API that
//! the next events carry, that the zones file keeps and that `check-config --print` shows, and a
//! motion mask saved through the API that the zones file keeps and the camera's gate applies at
//! once (its motion, read from `live.motion`, stops).
//!
//! Requests go over plain TCP (HTTP/1.1, `Connection: close`), so every header — `Origin`, `Host`,
//! `Authorization` — is exactly what the test wrote. Waits are failure guards ([`Pace`]).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;

use jetson_detectd::publish::event_message::EventMessage;

use crate::arch::daemon_command as daemon;
use crate::broker::{Broker, Subscriber};
use crate::daemon::{sample_source, RunningDaemon, TestConfig};
use crate::pace::Pace;

const TOKEN: &str = "t0ken-that-must-never-be-logged";

/// One HTTP answer.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.text()))
    }
}

/// Sends one request; `headers` come after `Host` (the address) unless they set their own `Host`.
/// The answer may take [`Pace::daemon_wait`]: a loaded machine slows the daemon's JPEG encodes and
/// chromedriver's first Chromium start alike, so no fixed guess bounds it.
pub fn request(address: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Answer {
    let mut stream = TcpStream::connect(address).unwrap_or_else(|e| panic!("connect {address}: {e}"));
    let patience = Pace::measured().daemon_wait();
    stream.set_read_timeout(Some(patience)).expect("timeout");
    let mut head = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("host")) {
        head += &format!("Host: {address}\r\n");
    }
    for (name, value) in headers {
        head += &format!("{name}: {value}\r\n");
    }
    if !body.is_empty() || method == "PUT" {
        head += &format!("Content-Length: {}\r\n", body.len());
    }
    head += "\r\n";
    stream.write_all(head.as_bytes()).expect("write request head");
    // The server may answer (413, 401) before it read a large body and close: that is its right.
    let _ = stream.write_all(body);
    // Read until the body is complete: some servers (chromedriver) keep the connection open.
    let mut raw = Vec::new();
    let mut buffer = [0u8; 64 * 1024];
    loop {
        if let Some(split) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&raw[..split]).to_ascii_lowercase();
            let length =
                head.lines().find_map(|line| line.strip_prefix("content-length:")?.trim().parse::<usize>().ok());
            let complete = match length {
                Some(length) => raw.len() >= split + 4 + length,
                None => head.contains("transfer-encoding: chunked") && raw.ends_with(b"0\r\n\r\n"),
            };
            if complete {
                break;
            }
        }
        match stream.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buffer[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                panic!(
                    "{method} {path} to {address}: no complete answer within {patience:?}; got {raw:?}",
                    raw = String::from_utf8_lossy(&raw)
                )
            }
            Err(_) => break,
        }
    }
    parse_answer(&raw)
}

fn parse_answer(raw: &[u8]) -> Answer {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or_else(|| {
        panic!("no complete HTTP head in {:?}", String::from_utf8_lossy(raw));
    });
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("{status_line}"));
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_string(), value.trim().to_string()))
        .collect();
    let mut body = raw[split + 4..].to_vec();
    let chunked = headers.iter().any(|(n, v)| n.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    if chunked {
        let mut decoded = Vec::new();
        let mut rest = &body[..];
        loop {
            let line_end = rest.windows(2).position(|w| w == b"\r\n").expect("chunk size line");
            let size =
                usize::from_str_radix(String::from_utf8_lossy(&rest[..line_end]).trim(), 16).expect("chunk size");
            rest = &rest[line_end + 2..];
            if size == 0 {
                break;
            }
            decoded.extend_from_slice(&rest[..size]);
            rest = &rest[size + 2..];
        }
        body = decoded;
    }
    Answer { status, headers, body }
}

/// The address from the daemon's "the page is on http://…/" log line.
pub fn http_address(daemon: &mut RunningDaemon) -> SocketAddr {
    let log = daemon.log_handle();
    let mut address = None;
    daemon.wait_until("the HTTP server's address in the log", || {
        address = log.text().lines().find_map(|line| {
            let rest = line.split("the page is on http://").nth(1)?;
            rest.split('/').next()?.parse().ok()
        });
        address.is_some()
    });
    address.expect("waited for it")
}

/// A daemon with the HTTP server on a free loopback port and two cameras showing sample images.
struct Fixture {
    _broker: Broker,
    dir: tempfile::TempDir,
    daemon: RunningDaemon,
    address: SocketAddr,
    subscriber: Subscriber,
    prefix: String,
}

impl Fixture {
    fn start(prefix: &str, with_token: bool, adjust: impl FnOnce(TestConfig) -> TestConfig) -> Fixture {
        let broker = Broker::start();
        let dir = tempfile::tempdir().expect("temp dir");
        let subscriber =
            Subscriber::connect(&broker, &format!("{}-sub", prefix.replace('/', "-")), &[&format!("{prefix}/#")]);
        let mut config = TestConfig::new(broker.port(), prefix)
            .set("http", "listen", "\"127.0.0.1:0\"")
            .set("http", "zones_file", &format!("{:?}", dir.path().join("state/zones.toml").display().to_string()))
            .camera("front", 4.0, &sample_source("dog.jpg", "loop"))
            .camera("back", 4.0, &sample_source("person.jpg", "loop"));
        if with_token {
            let token_file = dir.path().join("http-token");
            std::fs::write(&token_file, format!("{TOKEN}\n")).expect("write token");
            config = config.set("http", "token_file", &format!("{:?}", token_file.display().to_string()));
        }
        let path = adjust(config).write(&dir.path().join("config.toml"));
        let mut daemon = RunningDaemon::start(&path, &[]);
        let address = http_address(&mut daemon);
        Fixture { _broker: broker, dir, daemon, address, subscriber, prefix: prefix.to_string() }
    }

    fn get(&self, path: &str) -> Answer {
        request(self.address, "GET", path, &[], &[])
    }

    fn put_zones(&self, camera: &str, headers: &[(&str, &str)], body: &[u8]) -> Answer {
        let mut all = vec![("Content-Type", "application/json")];
        all.extend_from_slice(headers);
        request(self.address, "PUT", &format!("/api/cameras/{camera}/zones"), &all, body)
    }
}

/// One sample of an OpenMetrics exposition.
#[derive(Debug, Clone, PartialEq)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// A strict OpenMetrics text parser: every sample belongs to a family declared before it with
/// `# TYPE` (counters as `<family>_total`, histograms as `_bucket`/`_sum`/`_count`), names and
/// label names are valid, label values are quoted with valid escapes, values are numbers, the text
/// ends with `# EOF`, and every histogram's buckets are cumulative and end in `+Inf` = `_count`.
fn parse_openmetrics(text: &str) -> Vec<Sample> {
    let valid_name = |name: &str| {
        !name.is_empty()
            && name
                .chars()
                .enumerate()
                .all(|(i, c)| c.is_ascii_alphabetic() || c == '_' || c == ':' || (i > 0 && c.is_ascii_digit()))
    };
    let mut types: BTreeMap<String, String> = BTreeMap::new();
    let mut samples = Vec::new();
    let mut lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.pop(), Some("# EOF"), "the exposition must end with # EOF:\n{text}");
    for line in lines {
        if let Some(rest) = line.strip_prefix("# ") {
            let mut parts = rest.splitn(3, ' ');
            let (keyword, name, value) =
                (parts.next().unwrap(), parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            assert!(valid_name(name), "bad metric name in {line:?}");
            match keyword {
                "TYPE" => {
                    assert!(
                        ["counter", "gauge", "histogram", "info", "stateset", "unknown"].contains(&value),
                        "{line:?}"
                    );
                    assert!(
                        types.insert(name.to_string(), value.to_string()).is_none(),
                        "family declared twice: {line:?}"
                    );
                }
                "HELP" => assert!(!value.is_empty(), "empty help: {line:?}"),
                "UNIT" => assert!(name.ends_with(&format!("_{value}")), "a unit must end the name: {line:?}"),
                _ => panic!("unknown descriptor {line:?}"),
            }
            continue;
        }
        assert!(!line.starts_with('#'), "comment without a space: {line:?}");
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("no value: {line:?}"));
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            other => other.parse().unwrap_or_else(|_| panic!("bad value in {line:?}")),
        };
        let (name, labels) = match series.split_once('{') {
            None => (series, BTreeMap::new()),
            Some((name, rest)) => {
                (name, parse_labels(rest.strip_suffix('}').unwrap_or_else(|| panic!("{line:?}")), line))
            }
        };
        assert!(valid_name(name), "bad sample name in {line:?}");
        let family = types
            .iter()
            .find(|(family, kind)| {
                let suffixes: &[&str] = match kind.as_str() {
                    "counter" => &["_total", "_created"],
                    "histogram" => &["_bucket", "_sum", "_count", "_created"],
                    "info" => &["_info"],
                    _ => &[""],
                };
                suffixes.iter().any(|suffix| name == format!("{family}{suffix}"))
            })
            .unwrap_or_else(|| panic!("sample of no declared family: {line:?}"));
        assert!(family.1 != "histogram" || !name.ends_with("_bucket") || labels.contains_key("le"), "{line:?}");
        samples.push(Sample { name: name.to_string(), labels, value });
    }
    // Histograms: cumulative buckets ending in +Inf, which equals _count.
    for family in types.iter().filter(|(_, kind)| *kind == "histogram").map(|(family, _)| family) {
        let mut series: BTreeMap<BTreeMap<String, String>, Vec<(f64, f64)>> = BTreeMap::new();
        for sample in samples.iter().filter(|s| s.name == format!("{family}_bucket")) {
            let mut key = sample.labels.clone();
            let le = key.remove("le").expect("le");
            let le = if le == "+Inf" { f64::INFINITY } else { le.parse().expect("le is a number") };
            series.entry(key).or_default().push((le, sample.value));
        }
        for (key, buckets) in series {
            assert!(buckets.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1), "{family} {key:?}: {buckets:?}");
            let (last_le, last_count) = *buckets.last().expect("buckets");
            assert_eq!(last_le, f64::INFINITY, "{family} {key:?} has no +Inf bucket");
            let count = samples
                .iter()
                .find(|s| s.name == format!("{family}_count") && s.labels == key)
                .unwrap_or_else(|| panic!("{family} {key:?} has no _count"));
            assert_eq!(count.value, last_count, "{family} {key:?}: +Inf bucket != _count");
        }
    }
    samples
}

fn parse_labels(text: &str, line: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    let mut chars = text.chars().peekable();
    while chars.peek().is_some() {
        let name: String = chars.by_ref().take_while(|c| *c != '=').collect();
        assert!(
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "label name in {line:?}"
        );
        assert_eq!(chars.next(), Some('"'), "unquoted label value in {line:?}");
        let mut value = String::new();
        loop {
            match chars.next() {
                Some('\\') => match chars.next() {
                    Some('\\') => value.push('\\'),
                    Some('"') => value.push('"'),
                    Some('n') => value.push('\n'),
                    other => panic!("bad escape {other:?} in {line:?}"),
                },
                Some('"') => break,
                Some(c) => value.push(c),
                None => panic!("unterminated label value in {line:?}"),
            }
        }
        assert!(labels.insert(name, value).is_none(), "label twice in {line:?}");
        match chars.next() {
            Some(',') | None => {}
            other => panic!("expected , after a label, got {other:?} in {line:?}"),
        }
    }
    labels
}

fn value_of(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|s| s.name == name && labels.iter().all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v)))
        .map(|s| s.value)
}

#[test]
fn the_page_the_api_and_metrics_show_every_camera() {
    let mut fixture = Fixture::start("http-read", false, |config| config);

    let page = fixture.get("/");
    assert_eq!(page.status, 200);
    assert!(page.header("content-type").is_some_and(|t| t.starts_with("text/html")));
    assert!(page.header("content-security-policy").is_some_and(|csp| csp.contains("default-src 'self'")));
    let html = page.text();
    assert!(
        html.contains("/app.js")
            && html.contains("/style.css")
            && !html.contains("http://")
            && !html.contains("https://")
    );
    for asset in ["/app.js", "/style.css"] {
        let answer = fixture.get(asset);
        assert_eq!(answer.status, 200, "{asset}");
        assert!(!answer.text().contains("https://"), "{asset} must not load anything from elsewhere");
    }

    // Frames flow: the picture of each camera is a JPEG of the sample's size.
    for (camera, sample) in [("front", "dog.jpg"), ("back", "person.jpg")] {
        let (width, height) = image::image_dimensions(crate::daemon::sample(sample)).expect("sample size");
        let mut picture = fixture.get(&format!("/api/cameras/{camera}/latest.jpg"));
        fixture.daemon.wait_until(&format!("a picture of {camera}"), || {
            if picture.status != 200 {
                picture = request(fixture.address, "GET", &format!("/api/cameras/{camera}/latest.jpg"), &[], &[]);
            }
            picture.status == 200
        });
        assert_eq!(picture.header("content-type"), Some("image/jpeg"));
        let decoded = image::load_from_memory(&picture.body).expect("a JPEG");
        assert_eq!((decoded.width(), decoded.height()), (width, height), "{camera}");
    }
    assert_eq!(fixture.get("/api/cameras/nope/latest.jpg").status, 404);
    assert_eq!(fixture.get("/api/cameras/nope/zones").status, 404);
    assert_eq!(fixture.get("/etc/passwd").status, 404);
    assert_eq!(fixture.get("/api/cameras/..%2F..%2Fetc%2Fpasswd/zones").status, 404);

    let address = fixture.address;
    let mut status = serde_json::Value::Null;
    fixture.daemon.wait_until("status with both cameras streaming", || {
        status = request(address, "GET", "/api/status", &[], &[]).json();
        ["front", "back"].iter().all(|c| status["telemetry"]["cameras"][c]["state"] == "streaming")
    });
    assert_eq!(status["cameras"], serde_json::json!(["front", "back"]));
    assert_eq!(status["healthy"], true);
    assert_eq!(status["telemetry"]["engine"]["kind"], "cpu");
    assert!(status["model_load_s"].as_f64().is_some_and(|s| s > 0.0));

    let health = fixture.get("/healthz");
    assert_eq!((health.status, health.text().as_str()), (200, "ok\n"));

    let mut samples = Vec::new();
    fixture.daemon.wait_until("metrics with frames of both cameras", || {
        let answer = request(address, "GET", "/metrics", &[("Accept", "application/openmetrics-text")], &[]);
        assert_eq!(answer.status, 200);
        assert!(answer.header("content-type").is_some_and(|t| t.starts_with("application/openmetrics-text")));
        samples = parse_openmetrics(&answer.text());
        // The load figures come with the view's first refresh.
        value_of(&samples, "jetson_detectd_process_cpu_ratio", &[]).is_some()
            && ["front", "back"].iter().all(|camera| {
                // fps is a rate over telemetry's window: under qemu a frame can take longer than the
                // window, so only its presence is required; frames prove the camera ran.
                value_of(&samples, "jetson_detectd_camera_frames_total", &[("camera", camera)]).is_some_and(|n| n > 0.0)
                    && value_of(&samples, "jetson_detectd_camera_fps", &[("camera", camera)])
                        .is_some_and(|fps| fps >= 0.0)
            })
    });
    for stage in ["wait", "pre", "infer", "post", "total"] {
        let count = value_of(
            &samples,
            "jetson_detectd_camera_stage_latency_seconds_count",
            &[("camera", "front"), ("stage", stage)],
        );
        assert!(count.is_some_and(|n| n > 0.0), "no {stage} latencies");
    }
    assert_eq!(
        value_of(&samples, "jetson_detectd_camera_state", &[("camera", "back"), ("state", "streaming")]),
        Some(1.0)
    );
    assert_eq!(value_of(&samples, "jetson_detectd_healthy", &[]), Some(1.0));
    assert_eq!(value_of(&samples, "jetson_detectd_outlet_connected", &[("outlet", "mqtt")]), Some(1.0));
    for name in [
        "jetson_detectd_camera_dropped_frames_total",
        "jetson_detectd_camera_over_limit_frames_total",
        "jetson_detectd_camera_truncated_frames_total",
        "jetson_detectd_camera_frame_copies_total",
        "jetson_detectd_camera_gated_frames_total",
        "jetson_detectd_camera_inference_saved_seconds_total",
        "jetson_detectd_mqtt_takeovers_total",
        "jetson_detectd_inference_batch_size_count",
        "jetson_detectd_outlet_queue_messages",
        "jetson_detectd_outlet_queue_bytes",
        "jetson_detectd_outlet_delivered_messages_total",
        "jetson_detectd_outlet_dropped_messages_total",
        "jetson_detectd_mqtt_reconnects_total",
        "jetson_detectd_model_load_seconds",
        "jetson_detectd_context_scratch_bytes",
        "jetson_detectd_process_resident_memory_bytes",
    ] {
        assert!(samples.iter().any(|s| s.name == name), "no {name}");
    }
}

#[test]
fn writes_need_the_token_the_pages_own_origin_a_bounded_body_and_a_valid_zone() {
    let mut fixture = Fixture::start("http-write", true, |config| config);
    let good = br#"{"zones":[{"name":"lane","polygon":[[0.0,0.62],[1.0,0.62],[1.0,1.0],[0.0,1.0]]}],"lines":[]}"#;
    let bearer = format!("Bearer {TOKEN}");

    // Reads need no token.
    assert_eq!(fixture.get("/api/cameras/front/zones").status, 200);
    // Without [motion] no camera has a motion gate to watch.
    assert_eq!(fixture.get("/api/cameras/front/live.motion").status, 409);
    assert_eq!(fixture.get("/api/cameras/side/live.motion").status, 404);

    let answer = fixture.put_zones("front", &[], good);
    assert_eq!(answer.status, 401, "{}", answer.text());
    assert_eq!(answer.header("www-authenticate"), Some("Bearer"));
    assert_eq!(fixture.put_zones("front", &[("Authorization", "Bearer wrong")], good).status, 401);
    assert_eq!(fixture.put_zones("front", &[("Authorization", TOKEN)], good).status, 401, "the scheme is required");

    let own_origin = format!("http://{}", fixture.address);
    for (origin, site) in [("http://evil.example", None), ("null", None), (own_origin.as_str(), Some("cross-site"))] {
        let mut headers = vec![("Authorization", bearer.as_str()), ("Origin", origin)];
        headers.extend(site.map(|site| ("Sec-Fetch-Site", site)));
        let answer = fixture.put_zones("front", &headers, good);
        assert_eq!(answer.status, 403, "Origin {origin}, Sec-Fetch-Site {site:?}: {}", answer.text());
    }

    let bad = br#"{"zones":[{"name":"lane","polygon":[[0.0,0.0],[1.0,1.0],[1.0,0.0],[0.0,1.0]]}]}"#;
    let answer = fixture.put_zones("front", &[("Authorization", &bearer)], bad);
    assert_eq!(answer.status, 400, "{}", answer.text());
    assert_eq!(answer.json()["field"], "zones[0].polygon", "{}", answer.text());
    let answer = fixture.put_zones(
        "front",
        &[("Authorization", &bearer)],
        br#"{"zones":[{"name":"x","polygon":[[0,0],[1,0],[0,1]],"labels":["unicorn"]}]}"#,
    );
    assert_eq!((answer.status, answer.json()["field"].as_str()), (400, Some("zones[0].labels")), "{}", answer.text());
    let answer = fixture.put_zones("front", &[("Authorization", &bearer)], b"{not json");
    assert_eq!(answer.status, 400, "{}", answer.text());

    let huge = vec![b' '; 4 << 20];
    let answer = fixture.put_zones("front", &[("Authorization", &bearer)], &huge);
    assert_eq!(answer.status, 413, "{}", answer.text());

    assert!(!fixture.dir.path().join("state/zones.toml").exists(), "nothing refused may reach the zones file");
    let answer = fixture.put_zones("front", &[("Authorization", &bearer), ("Origin", &own_origin)], good);
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(fixture.get("/api/cameras/front/zones").json()["zones"][0]["name"], "lane");

    // The daemon's log line comes through a pipe: wait for it, then look for the token.
    let log = fixture.daemon.log_handle();
    fixture
        .daemon
        .wait_until("the save in the log", || log.text().contains("zones and lines of camera \"front\" saved"));
    let log = log.text();
    assert!(!log.contains(TOKEN), "the token is in the log:\n{log}");
}

/// Reads `GET /api/cameras/<camera>/live.motion` until `done` says so of the lines read so far
/// (each one JSON line); fails after [`Pace::daemon_wait`].
fn motion_lines(
    address: SocketAddr,
    camera: &str,
    done: impl Fn(&[serde_json::Value]) -> bool,
) -> Vec<serde_json::Value> {
    let mut stream = TcpStream::connect(address).expect("connect");
    stream.set_read_timeout(Some(Pace::measured().daemon_wait())).expect("timeout");
    write!(stream, "GET /api/cameras/{camera}/live.motion HTTP/1.1\r\nHost: {address}\r\n\r\n").expect("send");
    let mut reader = BufReader::new(stream);
    let mut status = String::new();
    reader.read_line(&mut status).expect("status line");
    assert!(status.starts_with("HTTP/1.1 200"), "live.motion: {status}");
    let mut lines = Vec::new();
    // Each JSON line is one chunk of the chunked body: the chunks' size lines are not JSON.
    while !done(&lines) {
        let mut line = String::new();
        assert!(reader.read_line(&mut line).expect("a motion line") > 0, "live.motion ended");
        if line.starts_with('{') {
            lines.push(serde_json::from_str(line.trim()).expect("a JSON line"));
        }
    }
    lines
}

#[test]
fn a_zone_saved_through_the_api_is_in_the_next_events_the_zones_file_and_the_printed_config() {
    // With motion gating (every frame still detected: the floor rate is above the cameras'), and a
    // camera whose picture moves, for the mask.
    let mut fixture = Fixture::start("http-zones", false, |config| {
        config
            .set("tracking", "stationary_s", "3600.0")
            .set("motion", "enabled", "true")
            .set("motion", "detect_interval_s", "0.1")
            .camera("moving", 4.0, "{ kind = \"synthetic\", width = 160, height = 120 }")
    });
    let events_topic = format!("{}/front/events", fixture.prefix);
    let body =
        br#"{"zones":[{"name":"everywhere","polygon":[[0.0,0.0],[1.0,0.0],[1.0,1.0],[0.0,1.0]],"labels":["dog"]}],
                    "lines":[{"name":"gate","points":[[0.5,1.0],[0.5,0.0]]}]}"#;
    let answer = fixture.put_zones("front", &[], body);
    assert_eq!(answer.status, 200, "{}", answer.text());
    let saved_at = fixture.subscriber.messages(&events_topic).len();

    let subscriber = &fixture.subscriber;
    fixture.daemon.wait_for_messages(subscriber, &events_topic, "an event in the new zone", |messages| {
        messages[saved_at.min(messages.len())..].iter().any(|m| {
            serde_json::from_slice::<EventMessage>(&m.payload)
                .is_ok_and(|e| e.label == "dog" && e.zones == ["everywhere"])
        })
    });
    // The page's event list shows it too: the live view is an outlet of its own, which may take
    // the event a moment after the MQTT outlet published it.
    let address = fixture.address;
    fixture.daemon.wait_until("the event in the page's event list", || {
        let events = request(address, "GET", "/api/events?camera=front&limit=500", &[], &[]).json();
        events["events"].as_array().is_some_and(|events| events.iter().any(|e| e["event"]["zones"][0] == "everywhere"))
    });

    let zones_file = fixture.dir.path().join("state/zones.toml");
    let saved = std::fs::read_to_string(&zones_file).expect("the zones file is written");
    assert!(saved.contains("name = \"everywhere\"") && saved.contains("name = \"gate\""), "{saved}");
    let printed = daemon()
        .args(["check-config", "--print", "--config"])
        .arg(fixture.dir.path().join("config.toml"))
        .output()
        .expect("run check-config");
    assert!(printed.status.success(), "{}", String::from_utf8_lossy(&printed.stderr));
    let printed = String::from_utf8_lossy(&printed.stdout);
    assert!(printed.contains("name = \"everywhere\""), "--print shows the saved zone:\n{printed}");
    a_mask_saved_through_the_api_is_kept_and_stops_the_motion_under_it(&fixture);
    check_config_names_the_zones_file_when_it_is_bad(fixture.dir.path());
}

/// The moving camera's square is motion frame after frame; a mask over the whole frame, saved
/// through the API, is in the zones file and the camera's gate sees no motion from then on.
fn a_mask_saved_through_the_api_is_kept_and_stops_the_motion_under_it(fixture: &Fixture) {
    let address = fixture.address;
    let moving =
        |line: &serde_json::Value| line["state"] == "moving" && !line["regions"].as_array().is_none_or(Vec::is_empty);
    motion_lines(address, "moving", |lines| lines.iter().any(moving));
    let answer = fixture.put_zones("moving", &[], br#"{"masks":[[[0.0,0.0],[0.5,0.0]]]}"#);
    assert_eq!((answer.status, answer.json()["field"].as_str()), (400, Some("masks[0]")), "{}", answer.text());
    let whole = br#"{"masks":[[[0.0,0.0],[1.0,0.0],[1.0,1.0],[0.0,1.0]]]}"#;
    let answer = fixture.put_zones("moving", &[], whole);
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(fixture.get("/api/cameras/moving/zones").json()["masks"].as_array().map(Vec::len), Some(1));
    let saved = std::fs::read_to_string(fixture.dir.path().join("state/zones.toml")).expect("the zones file");
    assert!(saved.contains("name = \"moving\"") && saved.contains("masks = [["), "{saved}");
    // The answer came once the gate's link had the masks, which the gate takes at its next frame:
    // the first line may be of a frame judged while they came.
    let lines = motion_lines(address, "moving", |lines| lines.len() >= 3);
    assert!(
        lines[1..]
            .iter()
            .all(|line| line["state"] == "still" && line["changed"] == 0.0 && line["regions"] == serde_json::json!([])),
        "no motion under the mask: {lines:?}"
    );
}

/// A zones file broken by hand is not applied, and `check-config` warns naming the file and the
/// key; it does not stop a start (issue 49: what the page saved never does).
fn check_config_names_the_zones_file_when_it_is_bad(dir: &Path) {
    let zones_file = dir.join("state/zones.toml");
    std::fs::write(
        &zones_file,
        "[[camera]]\nname = \"front\"\n[[camera.zone]]\nname = \"z\"\npolygon = [[0.0, 0.0]]\n",
    )
    .expect("write");
    let output = daemon().args(["check-config", "--config"]).arg(dir.join("config.toml")).output().expect("run");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("warning: ")
            && stderr.contains(&zones_file.display().to_string())
            && stderr.contains("camera[0].zone[0].polygon"),
        "{stderr}"
    );
}

#[test]
fn listening_beyond_loopback_without_a_token_is_a_config_error() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = TestConfig::new(1883, "http-open")
        .set("http", "listen", "\"0.0.0.0:8090\"")
        .camera("front", 1.0, &sample_source("dog.jpg", "loop"))
        .write(&dir.path().join("config.toml"));
    for command in ["check-config", "run"] {
        let output = daemon().args([command, "--config"]).arg(&config).output().expect("run");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(78), "{command}: {stderr}");
        assert!(stderr.contains("http.token_file"), "{command}: {stderr}");
    }
}

/// Issue 34: the controls over the HTTP API. A write needs the token; a body naming an unknown
/// camera or a threshold outside 0–1 changes nothing (400 naming the field); a good one is applied
/// at once, answered, published on the MQTT state topics (retained) and kept in the controls file,
/// from which a restarted daemon starts, showing the picture of a camera whose detection is off.
/// Motion gating's switch (issue 48) is kept like the others.
#[test]
fn controls_set_through_the_api_are_published_kept_and_survive_a_restart() {
    let mut fixture = Fixture::start("http-controls", true, |config| config);
    let config_path = fixture.dir.path().join("config.toml");
    let config_text = std::fs::read_to_string(&config_path).expect("the config");
    let file = config_text
        .lines()
        .find_map(|line| line.strip_prefix("file = "))
        .map(|value| value.trim_matches('"').to_string())
        .expect("the test config names its controls file");
    let bearer = format!("Bearer {TOKEN}");
    let put = |body: &[u8], headers: &[(&str, &str)]| {
        let mut all = vec![("Content-Type", "application/json")];
        all.extend_from_slice(headers);
        request(fixture.address, "PUT", "/api/controls", &all, body)
    };

    let before = fixture.get("/api/controls").json();
    assert_eq!(before["camera"]["front"]["detect"], true, "{before}");
    assert_eq!(put(br#"{"camera":{"front":{"detect":false}}}"#, &[]).status, 401);
    for (body, field) in [
        (&br#"{"camera":{"side":{"detect":false}}}"#[..], "camera.side"),
        (br#"{"score_threshold":1.5,"camera":{"front":{"detect":false}}}"#, "score_threshold"),
    ] {
        let answer = put(body, &[("Authorization", &bearer)]);
        assert_eq!((answer.status, answer.json()["field"].as_str()), (400, Some(field)), "{}", answer.text());
    }
    assert_eq!(fixture.get("/api/controls").json(), before, "a refused write changes nothing");

    assert_eq!(before["camera"]["front"]["gating"], true, "{before}");
    let body = br#"{"score_threshold":0.55,"camera":{"front":{"detect":false,"gating":false}}}"#;
    let answer = put(body, &[("Authorization", &bearer)]);
    assert_eq!(answer.status, 200, "{}", answer.text());
    let cameras = &answer.json()["camera"];
    assert_eq!(
        (
            cameras["front"]["detect"].as_bool(),
            cameras["back"]["detect"].as_bool(),
            cameras["front"]["gating"].as_bool()
        ),
        (Some(false), Some(true), Some(false))
    );
    let prefix = fixture.prefix.clone();
    fixture.subscriber.wait_for_payload(&format!("{prefix}/front/controls/detect"), b"OFF");
    fixture.subscriber.wait_for_payload(&format!("{prefix}/controls/score_threshold"), b"0.55");
    let log = fixture.daemon.log_handle();
    fixture.daemon.wait_until("the controls file", || {
        std::fs::read_to_string(&file)
            .is_ok_and(|text| text.contains("detect = false") && text.contains("gating = false"))
    });

    fixture.daemon.signal(libc::SIGTERM);
    assert!(fixture.daemon.wait_exit().success(), "a clean stop:\n{}", log.text());
    let mut restarted = RunningDaemon::start(&config_path, &[]);
    let address = http_address(&mut restarted);
    let mut after = serde_json::Value::Null;
    restarted.wait_until("the controls after the restart", || {
        after = request(address, "GET", "/api/controls", &[], &[]).json();
        after["camera"]["front"]["detect"] == false
    });
    assert_eq!(after["score_threshold"], 0.55, "{after}");
    assert_eq!(after["camera"]["front"]["gating"], false, "{after}");
    // Detection off is not the camera off: its picture goes on (no frame was ever detected in
    // this run).
    restarted.wait_until("a picture of front with its detection off", || {
        request(address, "GET", "/api/cameras/front/latest.jpg", &[], &[]).status == 200
    });
}

/// Review S5 and S3: a controls file that does not read (the daemon's own file) is set aside and
/// the daemon starts anyway; a control set while the model loads — here a command sent as soon as
/// the daemon says `building`, which it does once subscribed, usually before its model is loaded —
/// is applied and kept in the controls file like any later one. (A command the broker kept is no
/// command: `hostile::mqtt`.)
#[test]
fn a_bad_controls_file_is_set_aside_and_a_control_set_while_the_model_loads_is_kept() {
    let prefix = "early-controls";
    let broker = Broker::start();
    let status = format!("{prefix}/status");
    let subscriber = Subscriber::connect(&broker, "early-controls-sub", &[&format!("{prefix}/controls/#"), &status]);
    let dir = tempfile::tempdir().expect("temp dir");
    let config = TestConfig::new(broker.port(), prefix)
        .camera("front", 4.0, &sample_source("dog.jpg", "loop"))
        .write(&dir.path().join("config.toml"));
    let file = std::fs::read_to_string(&config)
        .expect("the config")
        .lines()
        .find_map(|line| line.strip_prefix("file = "))
        .map(|value| value.trim_matches('"').to_string())
        .expect("the test config names its controls file");
    std::fs::write(&file, "score_threshold = \"high\"\n").expect("a bad controls file");
    let mut daemon = RunningDaemon::start(&config, &[]);
    // `building` when the connection is up before the model is loaded, as it usually is.
    daemon.wait_for_messages(&subscriber, &status, "a status", |m| !m.is_empty());
    let published = std::process::Command::new("mosquitto_pub")
        .args(["-h", broker.host(), "-p", &broker.port().to_string(), "-q", "1"])
        .args(["-t", &format!("{prefix}/controls/score_threshold/set"), "-m", "0.65"])
        .status()
        .expect("mosquitto_pub (mosquitto-clients) runs");
    assert!(published.success(), "the command is published");
    subscriber.wait_for_payload(&format!("{prefix}/controls/score_threshold"), b"0.65");
    let file_name = Path::new(&file).file_name().expect("a file name").to_string_lossy().into_owned();
    let set_aside: Vec<_> = std::fs::read_dir(Path::new(&file).parent().expect("a directory"))
        .expect("the state directory")
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy().starts_with(&format!("{file_name}.bad-")))
        .map(|entry| entry.path())
        .collect();
    assert!(!set_aside.is_empty(), "the bad file is set aside");
    set_aside.iter().for_each(|path| std::fs::remove_file(path).expect("clean up"));
    daemon.wait_until("the early threshold in the controls file", || {
        std::fs::read_to_string(&file).is_ok_and(|text| text.contains("score_threshold = 0.65"))
    });
}
