//! `/metrics` read by Prometheus' own tools (Debian's `prometheus` package), against the real
//! daemon: `promtool check metrics` lints the classic text format that `curl` (`*/*`) and a scraper
//! asking for `text/plain;version=0.0.4` get, and a real Prometheus server scrapes the OpenMetrics
//! answer it asks for by name, with its strict OpenMetrics parser, and stores the samples.
//!
//! promtool's linter reads only the classic format: on OpenMetrics it cannot pair a counter's
//! family (`x`) with its sample (`x_total`) and reports "no help text" for every counter. So the
//! OpenMetrics answer goes through promtool too, and the test requires that this is all it says.
//!
//! Skipped, saying what to install, where `promtool` or `prometheus` is missing, except with
//! `CI=true`, where it fails ([`crate::prerequisite`]: `.ci/run` installs the package). Waits are
//! failure guards ([`Pace`]).

use std::io::Write;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::announced::announced;
use crate::broker::Broker;
use crate::daemon::{sample_source, RunningDaemon, TestConfig};
use crate::http::{http_address, request};
use crate::prerequisite::{runs, skip};

/// `promtool check metrics` on `text`: its exit status and what it printed.
fn promtool_check(text: &str) -> (bool, String) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start promtool");
    child.stdin.take().expect("stdin").write_all(text.as_bytes()).expect("write to promtool");
    let output = child.wait_with_output().expect("promtool");
    let said = String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr);
    (output.status.success(), said)
}

/// A Prometheus server on a loopback port of its choosing, scraping one target every `interval`
/// (which is also the scrape's timeout); killed on drop.
struct PrometheusServer {
    child: Child,
    address: SocketAddr,
    _dir: tempfile::TempDir,
}

impl PrometheusServer {
    fn scraping(target: SocketAddr, interval: Duration) -> PrometheusServer {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: {ms}ms\n  scrape_timeout: {ms}ms\nscrape_configs:\n  - job_name: jetson\n    \
                 static_configs:\n      - targets: [\"{target}\"]\n",
                ms = interval.as_millis()
            ),
        )
        .expect("write prometheus.yml");
        let mut child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg("--web.listen-address=127.0.0.1:0")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start prometheus");
        let stderr = child.stderr.take().expect("prometheus's stderr");
        let address = announced(&mut child, "prometheus", stderr, "msg=\"Listening on\" address=", |rest| {
            rest.trim().parse::<SocketAddr>().ok()
        });
        PrometheusServer { child, address, _dir: dir }
    }

    /// A JSON answer of the HTTP API, or `None` while the server is not up.
    fn api(&self, path: &str) -> Option<serde_json::Value> {
        std::net::TcpStream::connect(self.address).ok()?;
        let answer = request(self.address, "GET", path, &[], &[]);
        (answer.status == 200).then(|| answer.json())
    }
}

impl Drop for PrometheusServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn promtool_and_a_prometheus_server_read_metrics_in_both_formats() {
    if !(runs("promtool", "--version") && runs("prometheus", "--version")) {
        skip("no promtool or prometheus (apt-get install prometheus)");
        return;
    }
    let broker = Broker::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let config = TestConfig::new(broker.port(), "prometheus")
        .set("http", "listen", "\"127.0.0.1:0\"")
        .camera("front", 4.0, &sample_source("person.jpg", "loop"))
        .write(&dir.path().join("config.toml"));
    let mut daemon = RunningDaemon::start(&config, &[]);
    let address = http_address(&mut daemon);
    daemon.wait_until("metrics with frames", || {
        request(address, "GET", "/metrics", &[], &[]).text().lines().any(|line| {
            line.starts_with("jetson_detectd_camera_frames_total{")
                && line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()).is_some_and(|n| n > 0.0)
        })
    });

    // `curl /metrics | promtool check metrics` as a user types it: curl sends `Accept: */*`.
    for accept in ["*/*", "text/plain;version=0.0.4"] {
        let classic = request(address, "GET", "/metrics", &[("Accept", accept)], &[]);
        assert_eq!(classic.header("content-type"), Some("text/plain; version=0.0.4; charset=utf-8"), "{accept}");
        let (passed, said) = promtool_check(&classic.text());
        assert!(
            passed && said.trim().is_empty(),
            "promtool on the classic format ({accept}): {said}\n{}",
            classic.text()
        );
    }

    let openmetrics =
        request(address, "GET", "/metrics", &[("Accept", "application/openmetrics-text;version=1.0.0")], &[]);
    assert!(openmetrics.header("content-type").is_some_and(|t| t.starts_with("application/openmetrics-text")));
    let text = openmetrics.text();
    let counters: Vec<String> = text
        .lines()
        .filter_map(|line| Some(format!("{}_total", line.strip_prefix("# TYPE ")?.strip_suffix(" counter")?)))
        .collect();
    let (_, said) = promtool_check(&text);
    for problem in said.lines() {
        let unpaired_counter =
            problem.strip_suffix(" no help text").is_some_and(|name| counters.iter().any(|counter| counter == name));
        assert!(unpaired_counter, "promtool on OpenMetrics: {problem}\n{text}");
    }

    // A debug build's /metrics on a loaded machine can take longer than Prometheus's usual second:
    // the scrape's timeout is a generous multiple of what one took here, and a scrape that timed
    // out anyway is followed by the next (only what Prometheus made of an answer is judged).
    let mut slowest = Duration::ZERO;
    for _ in 0..3 {
        let started = Instant::now();
        request(address, "GET", "/metrics", &[], &[]);
        slowest = slowest.max(started.elapsed());
    }
    let interval = (slowest * 10).max(Duration::from_secs(1));
    let prometheus = PrometheusServer::scraping(address, interval);
    let mut target = serde_json::Value::Null;
    daemon.wait_until("Prometheus to scrape the daemon in time", || {
        target = prometheus.api("/api/v1/targets").map(|t| t["data"]["activeTargets"][0].clone()).unwrap_or_default();
        let scraped = !target["lastScrape"].as_str().unwrap_or("0001-01-01T00:00:00Z").starts_with("0001");
        scraped && !target["lastError"].as_str().unwrap_or_default().contains("deadline exceeded")
    });
    assert_eq!(target["health"], "up", "{target}");
    assert_eq!(target["lastError"], "", "{target}");
    let mut result = serde_json::Value::Null;
    daemon.wait_until("the frames counter in Prometheus", || {
        result = prometheus
            .api("/api/v1/query?query=jetson_detectd_camera_frames_total")
            .map(|answer| answer["data"]["result"].clone())
            .unwrap_or_default();
        result.as_array().is_some_and(|series| !series.is_empty())
    });
    assert_eq!(result[0]["metric"]["camera"], "front", "{result}");
    let buckets = prometheus
        .api("/api/v1/query?query=count(jetson_detectd_camera_stage_latency_seconds_bucket)")
        .expect("a query answer");
    assert!(buckets["data"]["result"][0]["value"][1].as_str().is_some_and(|n| n != "0"), "{buckets}");
}
