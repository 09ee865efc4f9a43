//! The webhook outlet against a real HTTP receiver the test starts: a plain HTTP/1.1 server on a
//! loopback port, one thread per connection, that records every request and answers as the test
//! scripts it (a status, a `Retry-After`, or no answer at all).
//!
//! The outlet is driven two ways: directly, with typed events, for the delivery rules (what is
//! sent, signed and filtered; retries and drops; the flush at stop); and through the real daemon,
//! whose tracking events must reach the receiver byte for byte as MQTT publishes them, whose
//! cameras must not wait for a receiver that never answers, and whose SIGTERM must flush the queue
//! (the `end` events of shutdown included) within the bound. Waits are failure guards only: no
//! assertion measures time.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use jetson_detectd::config::{Config, ConfigOrigin};
use jetson_detectd::controls::Controls;
use jetson_detectd::detection::{BoundingBox, Labels};
use jetson_detectd::publish::event_message::EventMessage;
use jetson_detectd::publish::kind::OutletStart;
use jetson_detectd::publish::object_event::{EventStamp, ObjectEvent};
use jetson_detectd::publish::outlet::{DaemonStatus, Outlet, Stop, TrackingUpdate};
use jetson_detectd::track::events::EventKind;
use sha2::Sha256;
use tokio_rustls::rustls::{ServerConfig, ServerConnection, StreamOwned};

use crate::broker::{Broker, Subscriber, WAIT};
use crate::daemon::{sample_source, toml_string, RunningDaemon, TestConfig};

/// How the receiver answers one request.
#[derive(Debug, Clone, Copy)]
enum Answer {
    Status(u16),
    /// 429 with `Retry-After: <seconds>`.
    Throttle(u64),
    /// No answer until the receiver stops.
    Hold,
}

/// One request as the receiver read it.
#[derive(Debug, Clone)]
struct Posted {
    method: String,
    path: String,
    /// Lower-case names.
    headers: BTreeMap<String, String>,
    body: Vec<u8>,
}

/// A real HTTP/1.1 receiver on a loopback port, plain or TLS.
struct Receiver {
    address: SocketAddr,
    posted: Arc<Mutex<Vec<Posted>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    tls: bool,
}

impl Receiver {
    /// Answers the `n`-th request (from 0) with `answer(n)`.
    fn start(answer: impl Fn(usize) -> Answer + Send + Sync + 'static) -> Receiver {
        Receiver::start_with(None, answer)
    }

    /// [`Receiver::start`] over TLS with `tls`'s certificate.
    fn start_with(
        tls: Option<Arc<ServerConfig>>,
        answer: impl Fn(usize) -> Answer + Send + Sync + 'static,
    ) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the receiver");
        let address = listener.local_addr().expect("its address");
        let posted = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let secure = tls.is_some();
        let thread = {
            let (posted, stop, answer) = (posted.clone(), stop.clone(), Arc::new(answer));
            let count = Arc::new(AtomicUsize::new(0));
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let (posted, stop, answer, count, tls) =
                        (posted.clone(), stop.clone(), answer.clone(), count.clone(), tls.clone());
                    std::thread::spawn(move || match tls {
                        None => serve(stream, &posted, &stop, &*answer, &count),
                        Some(config) => {
                            let Ok(connection) = ServerConnection::new(config) else { return };
                            serve(StreamOwned::new(connection, stream), &posted, &stop, &*answer, &count);
                        }
                    });
                }
            })
        };
        Receiver { address, posted, stop, thread: Some(thread), tls: secure }
    }

    fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}/hooks/jetson?site=shop", self.address)
    }

    fn posted(&self) -> Vec<Posted> {
        self.posted.lock().expect("posted").clone()
    }

    /// Waits until `done` holds for what was posted (a failure guard of [`WAIT`]).
    fn wait_until(&self, what: &str, done: impl Fn(&[Posted]) -> bool) -> Vec<Posted> {
        let deadline = Instant::now() + WAIT;
        loop {
            let posted = self.posted();
            if done(&posted) {
                return posted;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}; posted: {posted:?}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.address);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Reads one request of `stream`, records it and answers it.
fn serve(
    stream: impl Read + Write,
    posted: &Mutex<Vec<Posted>>,
    stop: &AtomicBool,
    answer: &dyn Fn(usize) -> Answer,
    count: &AtomicUsize,
) {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let mut words = line.split_whitespace();
    let (method, path) = (words.next().unwrap_or_default().to_owned(), words.next().unwrap_or_default().to_owned());
    let mut headers = BTreeMap::new();
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).unwrap_or(0) == 0 || header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_owned());
        }
    }
    let length: usize = headers.get("content-length").and_then(|length| length.parse().ok()).unwrap_or(0);
    let mut body = vec![0; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    posted.lock().expect("posted").push(Posted { method, path, headers, body });
    let (status, extra) = match answer(count.fetch_add(1, Ordering::SeqCst)) {
        Answer::Status(status) => (status, String::new()),
        Answer::Throttle(seconds) => (429, format!("Retry-After: {seconds}\r\n")),
        Answer::Hold => {
            while !stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(10));
            }
            return;
        }
    };
    let stream = reader.get_mut();
    let _ = write!(stream, "HTTP/1.1 {status} Scripted\r\nContent-Length: 0\r\nConnection: close\r\n{extra}\r\n");
    let _ = stream.flush();
}

/// A TLS server configuration with `dir`'s test certificate for 127.0.0.1
/// ([`crate::broker::make_test_certificates`]).
fn tls_config(dir: &Path) -> Arc<ServerConfig> {
    crate::broker::make_test_certificates(dir);
    let pem = |name: &str| std::fs::read(dir.join(name)).expect("a certificate file");
    let certificates =
        rustls_pemfile::certs(&mut pem("server.pem").as_slice()).collect::<Result<Vec<_>, _>>().expect("certs");
    let key = rustls_pemfile::private_key(&mut pem("server.key").as_slice()).expect("the key").expect("a key");
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(certificates, key)
        .expect("the server certificate");
    Arc::new(config)
}

/// A loopback address nothing listens on.
fn nobody_listening() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = listener.local_addr().expect("address");
    drop(listener);
    format!("http://{address}/")
}

const LABELS: &str = "person\ncar\n";
const PERSON: usize = 0;
const CAR: usize = 1;

/// The daemon's config with two cameras and `webhook` (the keys of one `[[webhook]]` table).
fn config(webhook: &str) -> Config {
    let text = format!(
        "[[camera]]\nname = \"front\"\nsource = {{ kind = \"synthetic\" }}\n\
         [[camera]]\nname = \"back\"\nsource = {{ kind = \"synthetic\" }}\n\
         [[webhook]]\n{webhook}\n"
    );
    jetson_detectd::cmd::outlets::schema()
        .from_toml(&text, ConfigOrigin::File("webhook.toml".into()), Path::new("/"))
        .expect("the webhook config")
}

/// The webhook outlet of `config`, started on `runtime`.
fn webhook(runtime: &tokio::runtime::Runtime, config: &Config, labels: &Arc<Labels>) -> Arc<dyn Outlet> {
    let _entered = runtime.enter();
    let start = OutletStart {
        config,
        run: "0123456789abcdef".into(),
        labels: labels.clone(),
        controls: Arc::new(Controls::new(config)),
        status: DaemonStatus::Online,
    };
    let mut outlets = (jetson_detectd::publish::webhook::OUTLET.start)(&start).expect("the webhook starts");
    assert_eq!(outlets.len(), 1);
    outlets.remove(0)
}

fn labels() -> Arc<Labels> {
    Arc::new(Labels::parse(LABELS, Path::new("labels.txt")).expect("labels"))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a runtime")
}

/// An event of track `track`, its `seq`-th of the run.
fn event(kind: EventKind, track: u64, class_id: usize, seq: u64) -> ObjectEvent {
    let at = UNIX_EPOCH + Duration::from_millis(1_795_341_600_000 + 200 * seq);
    ObjectEvent {
        kind,
        track_id: track,
        class_id,
        best_score: 0.875,
        bbox: BoundingBox { x1: 10.0, y1: 20.0, x2: 110.0, y2: 220.0 },
        first_seen: at,
        last_seen: at,
        zones: vec!["drive".into()],
        crossed: None,
        changes: Default::default(),
        stationary: false,
        frames: 3,
        frame: Some(seq),
        stamp: Some(EventStamp { run: "0123456789abcdef".into(), seq }),
        picture: None,
        clip: None,
        attributes: Default::default(),
        identity: None,
    }
}

fn hand_over(outlet: &dyn Outlet, camera: &str, events: &[ObjectEvent]) {
    outlet.tracking(camera, &TrackingUpdate { events, occupancy: &[] });
}

fn figures(outlet: &dyn Outlet) -> serde_json::Value {
    outlet.figures().expect("a webhook has figures").report
}

fn wait_for_figures(outlet: &dyn Outlet, what: &str, done: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let report = figures(outlet);
        if done(&report) {
            return report;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}; figures: {report}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `sha256=<hex>` of `body` with `key`, as a receiver checks it.
fn signature(key: &[u8], body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("any key length");
    mac.update(body);
    let hex: String = mac.finalize().into_bytes().iter().map(|byte| format!("{byte:02x}")).collect();
    format!("sha256={hex}")
}

#[test]
fn events_it_takes_are_posted_as_their_event_messages_byte_for_byte_and_signed() {
    let receiver = Receiver::start(|_| Answer::Status(204));
    let dir = tempfile::tempdir().expect("tempdir");
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "s3cret-key\n").expect("write the secret");
    let config = config(&format!(
        "name = \"alerts\"\nurl = {}\nevents = [\"start\", \"end\"]\nlabels = [\"person\"]\ncameras = [\"front\"]\n\
         headers = {{ X-Site = \"shop\" }}\nsecret_file = {}\n",
        toml_string(&receiver.url()),
        toml_string(&secret.display().to_string())
    ));
    let (runtime, labels) = (runtime(), labels());
    let outlet = webhook(&runtime, &config, &labels);
    assert_eq!(outlet.name(), "alerts");
    let start = event(EventKind::Start, 1, PERSON, 0);
    let end = event(EventKind::End, 1, PERSON, 3);
    hand_over(outlet.as_ref(), "front", &[start.clone(), event(EventKind::Update, 1, PERSON, 1)]);
    hand_over(outlet.as_ref(), "front", &[event(EventKind::Start, 2, CAR, 2)]);
    hand_over(outlet.as_ref(), "back", &[event(EventKind::Start, 7, PERSON, 0)]);
    hand_over(outlet.as_ref(), "front", std::slice::from_ref(&end));
    let posted = receiver.wait_until("the start and the end", |posted| posted.len() >= 2);
    let report = wait_for_figures(outlet.as_ref(), "both counted as delivered", |report| report["delivered"] == 2);
    assert_eq!(report, serde_json::json!({"queued": 0, "delivered": 2, "dropped": 0, "retries": 0}));
    let expected = [start, end].map(|event| EventMessage::new("front", &event, &labels).to_json());
    for (request, body) in posted.iter().zip(&expected) {
        assert_eq!((request.method.as_str(), request.path.as_str()), ("POST", "/hooks/jetson?site=shop"));
        assert_eq!(&request.body, body, "the event message, byte for byte");
        assert_eq!(request.headers["content-type"], "application/json");
        assert_eq!(request.headers["x-site"], "shop");
        assert_eq!(request.headers["host"], receiver.address.to_string());
        assert_eq!(request.headers["x-jetson-detectd-signature"], signature(b"s3cret-key", body));
    }
    runtime.block_on(outlet.clone().stop(Stop::Shutdown));
    assert_eq!(receiver.posted().len(), 2, "the update, the car and camera back were not the webhook's");
}

#[test]
fn a_receiver_answering_500_is_retried_with_back_off_then_the_event_is_dropped_and_counted() {
    let receiver = Receiver::start(|_| Answer::Status(500));
    let config =
        config(&format!("url = {}\nretries = 2\nretry_min_ms = 1\nretry_max_ms = 5\n", toml_string(&receiver.url())));
    let (runtime, labels) = (runtime(), labels());
    let outlet = webhook(&runtime, &config, &labels);
    hand_over(outlet.as_ref(), "front", &[event(EventKind::Start, 1, PERSON, 0)]);
    let report = wait_for_figures(outlet.as_ref(), "the event dropped", |report| report["dropped"] == 1);
    assert_eq!((&report["retries"], &report["delivered"], &report["queued"]), (&2.into(), &0.into(), &0.into()));
    assert!(report["last_failure"].as_str().is_some_and(|why| why.contains("500")), "{report}");
    assert_eq!(receiver.posted().len(), 3, "the first attempt and two retries");
    let metrics: Vec<(&str, String)> = outlet
        .figures()
        .expect("figures")
        .metrics
        .iter()
        .map(|metric| (metric.name, format!("{:?}", metric.samples)))
        .collect();
    assert!(metrics.iter().any(|(name, _)| *name == "outlet_dropped_messages"), "{metrics:?}");
    runtime.block_on(outlet.stop(Stop::Shutdown));
}

#[test]
fn a_receiver_answering_429_is_asked_again_after_its_retry_after_capped_and_then_takes_the_event() {
    let receiver = Receiver::start(|n| if n < 2 { Answer::Throttle(3600) } else { Answer::Status(200) });
    let config =
        config(&format!("url = {}\nretries = 3\nretry_min_ms = 1\nretry_max_ms = 20\n", toml_string(&receiver.url())));
    let (runtime, labels) = (runtime(), labels());
    let outlet = webhook(&runtime, &config, &labels);
    hand_over(outlet.as_ref(), "front", &[event(EventKind::Start, 1, PERSON, 0)]);
    // An hour's Retry-After is capped at retry_max_ms: the event gets through at once.
    let report = wait_for_figures(outlet.as_ref(), "the event delivered", |report| report["delivered"] == 1);
    assert_eq!((&report["retries"], &report["dropped"]), (&2.into(), &0.into()));
    let bodies: Vec<Vec<u8>> = receiver.posted().into_iter().map(|posted| posted.body).collect();
    assert_eq!(bodies.len(), 3);
    assert!(bodies.windows(2).all(|pair| pair[0] == pair[1]), "the same event each time");
    runtime.block_on(outlet.stop(Stop::Shutdown));
}

#[test]
fn a_receiver_that_is_down_or_never_answers_never_holds_up_the_hand_over_and_every_event_is_counted() {
    let hold = Receiver::start(|_| Answer::Hold);
    for (url, timeout) in [(nobody_listening(), 5000), (hold.url(), 50)] {
        let config = config(&format!(
            "url = {}\nqueue = 4\nretries = 1\nretry_min_ms = 1\nretry_max_ms = 1\ntimeout_ms = {timeout}\n",
            toml_string(&url)
        ));
        let (runtime, labels) = (runtime(), labels());
        let outlet = webhook(&runtime, &config, &labels);
        // The hand-over happens on the inference worker: it only queues, whatever the receiver.
        let handed = {
            let outlet = outlet.clone();
            let (done, finished) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                for seq in 0..40 {
                    hand_over(outlet.as_ref(), "front", &[event(EventKind::Start, seq + 1, PERSON, seq)]);
                }
                let _ = done.send(());
            });
            finished.recv_timeout(WAIT)
        };
        assert!(handed.is_ok(), "{url}: the hand-over waited for the receiver");
        let report = wait_for_figures(outlet.as_ref(), "every event dropped", |report| report["dropped"] == 40);
        assert_eq!((&report["delivered"], &report["queued"]), (&0.into(), &0.into()), "{url}: {report}");
        runtime.block_on(outlet.stop(Stop::Shutdown));
    }
    assert!(!hold.posted().is_empty(), "the receiver that never answers was asked");
}

#[test]
fn stop_delivers_what_is_queued_then_within_the_bound_drops_and_counts_what_is_left() {
    let (runtime, labels) = (runtime(), labels());
    let fine = Receiver::start(|_| Answer::Status(200));
    let outlet = webhook(
        &runtime,
        &config(&format!("url = {}\nshutdown_flush_ms = 60000\n", toml_string(&fine.url()))),
        &labels,
    );
    let events: Vec<ObjectEvent> = (0..10).map(|seq| event(EventKind::End, seq + 1, PERSON, seq)).collect();
    hand_over(outlet.as_ref(), "front", &events);
    runtime.block_on(outlet.clone().stop(Stop::Shutdown));
    assert_eq!(figures(outlet.as_ref())["delivered"], 10, "everything queued went out before the stop ended");
    assert_eq!(fine.posted().len(), 10);
    hand_over(outlet.as_ref(), "front", &events[..1]);
    assert_eq!(figures(outlet.as_ref())["dropped"], 1, "an event after the stop is dropped and counted");

    let stuck = Receiver::start(|_| Answer::Hold);
    let config = config(&format!("url = {}\ntimeout_ms = 60000\nshutdown_flush_ms = 100\n", toml_string(&stuck.url())));
    let outlet = webhook(&runtime, &config, &labels);
    hand_over(outlet.as_ref(), "front", &events[..3]);
    stuck.wait_until("the first request", |posted| !posted.is_empty());
    // The guard only: the stop ends by itself at its bound, long before this.
    let stopped = runtime.block_on(async { tokio::time::timeout(WAIT, outlet.clone().stop(Stop::Shutdown)).await });
    assert!(stopped.is_ok(), "the stop waited past its bound for a receiver that never answers");
    let report = figures(outlet.as_ref());
    assert_eq!(
        (&report["dropped"], &report["delivered"], &report["queued"]),
        (&3.into(), &0.into(), &0.into()),
        "{report}"
    );
}

#[test]
fn an_https_receiver_gets_the_events_when_its_ca_is_trusted_and_none_when_it_is_not() {
    let dir = tempfile::tempdir().expect("tempdir");
    let receiver = Receiver::start_with(Some(tls_config(dir.path())), |_| Answer::Status(200));
    let ca = dir.path().join("ca.pem").display().to_string();
    let (runtime, labels) = (runtime(), labels());
    let trusted = webhook(
        &runtime,
        &config(&format!("url = {}\nca_file = {}\n", toml_string(&receiver.url()), toml_string(&ca))),
        &labels,
    );
    let start = event(EventKind::Start, 1, PERSON, 0);
    hand_over(trusted.as_ref(), "front", std::slice::from_ref(&start));
    let posted = receiver.wait_until("the event over TLS", |posted| !posted.is_empty());
    assert_eq!(posted[0].body, EventMessage::new("front", &start, &labels).to_json());
    runtime.block_on(trusted.stop(Stop::Shutdown));

    let config = config(&format!("url = {}\nretries = 0\n", toml_string(&receiver.url())));
    let untrusted = webhook(&runtime, &config, &labels);
    hand_over(untrusted.as_ref(), "front", &[start]);
    let report = wait_for_figures(untrusted.as_ref(), "the event dropped", |report| report["dropped"] == 1);
    assert!(report["last_failure"].as_str().is_some_and(|why| why.contains("TLS")), "{report}");
    assert_eq!(receiver.posted().len(), 1, "no request without a trusted certificate");
    runtime.block_on(untrusted.stop(Stop::Shutdown));
}

/// The daemon with a webhook and MQTT: a person in view starts a track; the webhook gets its
/// `start` as MQTT's `events` topic has it, byte for byte and signed; SIGTERM ends the track and
/// the queue is flushed before the daemon exits, so the receiver has the `end` too.
#[test]
fn the_daemon_posts_the_events_mqtt_publishes_byte_for_byte_and_flushes_the_end_at_sigterm() {
    let prefix = "e2e-webhook";
    let broker = Broker::start();
    let receiver = Receiver::start(|_| Answer::Status(200));
    let dir = tempfile::tempdir().expect("tempdir");
    let secret = dir.path().join("webhook-secret");
    std::fs::write(&secret, "shared key\n").expect("write the secret");
    let config = TestConfig::new(broker.port(), prefix)
        .camera("front", 5.0, &sample_source("person.jpg", "loop"))
        .append(&format!(
            "[[webhook]]\nname = \"hooks\"\nurl = {}\nsecret_file = {}\nlabels = [\"person\"]\nshutdown_flush_ms = 20000\n",
            toml_string(&receiver.url()),
            toml_string(&secret.display().to_string())
        ))
        .write(&dir.path().join("config.toml"));
    let events_topic = format!("{prefix}/front/events");
    let subscriber = Subscriber::connect(&broker, "e2e-webhook-sub", &[&events_topic]);
    let mut daemon = RunningDaemon::start(&config, &[]);
    daemon.wait_for_messages(&subscriber, &events_topic, "a start", |messages| !messages.is_empty());
    receiver.wait_until("the start posted", |posted| !posted.is_empty());
    daemon.signal(libc::SIGTERM);
    assert_eq!(daemon.wait_exit().code(), Some(0), "log:\n{}", daemon.log());
    let log = daemon.log();
    let published: Vec<Vec<u8>> =
        subscriber.messages(&events_topic).into_iter().map(|message| message.payload).collect();
    let kinds = |bodies: &[Vec<u8>]| -> Vec<String> {
        bodies
            .iter()
            .map(|body| serde_json::from_slice::<EventMessage>(body).expect("an event message").kind)
            .filter(|kind| kind != "update")
            .collect()
    };
    assert!(kinds(&published).contains(&"end".to_string()), "SIGTERM ends the track: {:?}\n{log}", kinds(&published));
    let posted = receiver.posted();
    let bodies: Vec<Vec<u8>> = posted.iter().map(|request| request.body.clone()).collect();
    let starts_and_ends: Vec<Vec<u8>> = published
        .into_iter()
        .filter(|body| {
            serde_json::from_slice::<EventMessage>(body)
                .is_ok_and(|message| message.kind != "update" && message.label == "person")
        })
        .collect();
    assert_eq!(
        bodies, starts_and_ends,
        "every start and end, as MQTT published them, the last flushed at SIGTERM\n{log}"
    );
    for request in &posted {
        assert_eq!(request.headers["x-jetson-detectd-signature"], signature(b"shared key", &request.body));
    }
    assert!(log.contains("webhook hooks: stopped; "), "{log}");
}

/// A receiver that never answers: the camera's frames go on being processed and published, and
/// SIGTERM ends the daemon within the webhook's flush bound, counting what it could not deliver.
#[test]
fn a_receiver_that_never_answers_holds_up_no_camera_and_sigterm_ends_within_the_flush_bound() {
    let prefix = "e2e-webhook-stuck";
    let broker = Broker::start();
    let receiver = Receiver::start(|_| Answer::Hold);
    let dir = tempfile::tempdir().expect("tempdir");
    let config = TestConfig::new(broker.port(), prefix)
        .set("mqtt", "publish", "\"every_frame\"")
        .camera("front", 5.0, &sample_source("person.jpg", "loop"))
        .append(&format!(
            "[[webhook]]\nurl = {}\ntimeout_ms = 60000\nretries = 20\nshutdown_flush_ms = 200\n",
            toml_string(&receiver.url())
        ))
        .write(&dir.path().join("config.toml"));
    let detections = format!("{prefix}/front/detections");
    let subscriber = Subscriber::connect(&broker, "e2e-webhook-stuck-sub", &[&detections]);
    let mut daemon = RunningDaemon::start(&config, &[]);
    receiver.wait_until("the start posted and held", |posted| !posted.is_empty());
    let before = subscriber.messages(&detections).len();
    daemon.wait_for_messages(&subscriber, &detections, "frames while the receiver holds the webhook", |messages| {
        messages.len() >= before + 5
    });
    daemon.signal(libc::SIGTERM);
    assert_eq!(daemon.wait_exit().code(), Some(0), "log:\n{}", daemon.log());
    let log = daemon.log();
    assert!(log.contains("not delivered: the flush at shutdown ran out"), "{log}");
}
