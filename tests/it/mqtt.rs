//! The MQTT publisher against a real mosquitto: status and Last Will, payload round trip, no QoS 1
//! loss across a broker restart, the queue bound while the broker is away, reconnecting as soon as
//! a broker that was away comes back (but pacing a broker that refuses us), and a takeover told
//! from a broker that restarts.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, UNIX_EPOCH};

use jetson_detectd::config::ConfigOrigin;
use jetson_detectd::detection::{BoundingBox, Detection, Labels};
use jetson_detectd::frame::{FrameMeta, PixelFormat};
use jetson_detectd::publish::mqtt::{MqttSettings, MqttStats, Publisher, STATUS_BUILDING, STATUS_ONLINE};
use jetson_detectd::publish::payload::{detections_message, DetectionsMessage, Latency};
use rumqttc::QoS;
use tokio::runtime::Runtime;

use crate::broker::{Broker, Subscriber, WAIT};

/// Settings through the real config path, with timings small enough for tests.
fn settings(broker: &Broker, prefix: &str, qos: u8, queue_capacity: usize) -> MqttSettings {
    settings_with(broker, prefix, qos, queue_capacity, "")
}

/// [`settings`] plus extra `[mqtt]` lines.
fn settings_with(broker: &Broker, prefix: &str, qos: u8, queue_capacity: usize, extra: &str) -> MqttSettings {
    let text = format!(
        r#"
        [device]
        id = "it"
        [model]
        onnx = "m.onnx"
        labels = "l.txt"
        decoder = "ssd"
        input = {{ width = 300, height = 300, layout = "nhwc", dtype = "u8" }}
        [[camera]]
        name = "front"
        source = {{ kind = "synthetic" }}
        [mqtt]
        host = "{host}"
        port = {port}
        client_id = "{prefix}-publisher"
        prefix = "{prefix}"
        qos = {qos}
        keep_alive_s = 2
        queue_capacity = {queue_capacity}
        shutdown_flush_ms = 20000
        reconnect_min_ms = 20
        reconnect_max_ms = 200
        {extra}
        "#,
        host = broker.host(),
        port = broker.port(),
    );
    let schema = jetson_detectd::cmd::outlets::schema();
    let config = schema.from_toml(&text, ConfigOrigin::File("it.toml".into()), Path::new("/")).expect("test config");
    MqttSettings::from_config(&config).expect("mqtt settings")
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("tokio runtime")
}

fn start(runtime: &Runtime, settings: MqttSettings) -> Publisher {
    let _entered = runtime.enter();
    Publisher::start(settings).expect("publisher starts")
}

/// Polls the publisher's counters until `done` holds (failure guard: [`WAIT`]).
fn wait_for_stats(publisher: &Publisher, what: &str, done: impl Fn(&MqttStats) -> bool) -> MqttStats {
    let deadline = Instant::now() + WAIT;
    loop {
        let stats = publisher.stats();
        if done(&stats) {
            return stats;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}; stats: {stats:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn sequence_numbers(messages: &[crate::broker::Received]) -> BTreeSet<u32> {
    messages.iter().map(|m| m.text().parse::<u32>().expect("sequence number payload")).collect()
}

#[test]
fn status_is_online_then_offline_after_shutdown_with_everything_flushed() {
    let broker = Broker::start();
    let subscriber = Subscriber::connect(&broker, "status-sub", &["status-test/#"]);
    let runtime = runtime();
    let publisher = start(&runtime, settings(&broker, "status-test", 1, 100));
    assert_eq!(publisher.topic("status"), "status-test/status");
    subscriber.wait_for_payload("status-test/status", b"online");

    for n in 0..20u32 {
        publisher.publish(publisher.topic("front/detections"), n.to_string().into_bytes(), false);
    }
    runtime.block_on(publisher.shutdown());
    let status = subscriber.wait_for_payload("status-test/status", b"offline");
    assert_eq!(status.last().map(|m| m.qos), Some(QoS::AtLeastOnce));
    // Everything queued before shutdown was acknowledged before the `offline` went out.
    assert_eq!(sequence_numbers(&subscriber.messages("status-test/front/detections")), (0..20).collect());
    let stats = publisher.stats();
    assert_eq!((stats.queued, stats.dropped, stats.connected), (0, 0, false), "{stats:?}");
    assert_eq!(stats.published, 22, "20 messages + online + offline: {stats:?}");

    publisher.publish(publisher.topic("late"), b"too late".to_vec(), false);
    assert_eq!(publisher.stats().dropped, 1);

    let late = Subscriber::connect(&broker, "status-late-sub", &["status-test/status"]);
    let retained = late.wait_for_payload("status-test/status", b"offline");
    assert!(retained[0].retain, "the status is retained");
}

#[test]
fn last_will_says_offline_when_the_client_dies_without_disconnect() {
    let broker = Broker::start();
    let subscriber = Subscriber::connect(&broker, "will-sub", &["will-test/status"]);
    let runtime = runtime();
    let publisher = start(&runtime, settings(&broker, "will-test", 1, 100));
    subscriber.wait_for_payload("will-test/status", b"online");

    // No shutdown(): the connection task is aborted and its socket closed without DISCONNECT.
    drop(publisher);
    drop(runtime);
    subscriber.wait_for_payload("will-test/status", b"offline");
    let late = Subscriber::connect(&broker, "will-late-sub", &["will-test/status"]);
    let retained = late.wait_for_payload("will-test/status", b"offline");
    assert!(retained[0].retain, "the Last Will is retained");
}

#[test]
fn detections_payload_round_trips_through_the_broker_with_qos2() {
    let broker = Broker::start();
    let subscriber = Subscriber::connect(&broker, "payload-sub", &["payload-test/front/detections"]);
    let runtime = runtime();
    let publisher = start(&runtime, settings(&broker, "payload-test", 2, 100));

    let labels = Labels::parse("person\nbicycle\ncar\n", Path::new("labels")).expect("labels");
    let meta = FrameMeta {
        width: 640,
        height: 480,
        format: PixelFormat::Rgb8,
        sequence: 42,
        captured_at: UNIX_EPOCH + Duration::from_millis(1_795_341_600_250),
    };
    let latency = Latency {
        wait: Some(Duration::from_micros(1_500)),
        preprocess: Duration::from_micros(500),
        infer: Duration::from_millis(8),
        postprocess: Duration::from_micros(250),
        total: Duration::from_micros(10_250),
    };
    let detections =
        [Detection { class_id: 2, score: 0.875, bbox: BoundingBox { x1: 12.5, y1: 30.0, x2: 300.25, y2: 479.0 } }];
    let payload = detections_message("front", &meta, &latency, &detections, &labels);
    publisher.publish(publisher.topic("front/detections"), payload.clone(), false);

    let received = subscriber.wait_until("payload-test/front/detections", "one message", |m| !m.is_empty());
    assert_eq!(received[0].payload, payload);
    let message: DetectionsMessage = serde_json::from_slice(&received[0].payload).expect("valid JSON");
    assert_eq!(message.envelope.schema, 1);
    assert_eq!((message.camera.as_str(), message.frame), ("front", 42));
    assert_eq!(message.ts, "2026-11-22T10:00:00.250Z");
    assert_eq!((message.width, message.height), (640, 480));
    assert_eq!(message.latency_ms.total, 10.25);
    assert_eq!(message.detections.len(), 1);
    assert_eq!(message.detections[0].label, "car");
    assert_eq!(message.detections[0].score, 0.875);
    assert_eq!(message.detections[0].bbox.x2, 300.3);

    // QoS 2 completes with PUBCOMP: the queue drains.
    wait_for_stats(&publisher, "the QoS 2 message to be completed", |s| s.queued == 0 && s.published >= 2);
    runtime.block_on(publisher.shutdown());
}

/// How the broker goes away in the middle of a stream of QoS 1 messages.
enum Outage {
    /// SIGTERM: the broker acknowledges what it has read and saves its state.
    GracefulRestart,
    /// SIGSTOP, publishes pile up unacknowledged, then SIGKILL: whatever was in flight is gone.
    Crash,
}

fn no_qos1_message_is_lost_across(outage: Outage, prefix: &str) {
    const TOTAL: u32 = 600;
    let mut broker = Broker::start();
    let subscriber = Subscriber::connect(&broker, &format!("{prefix}-sub"), &[&format!("{prefix}/#")]);
    let runtime = runtime();
    let publisher = start(&runtime, settings(&broker, prefix, 1, 10_000));
    let status_topic = publisher.topic("status");
    let data_topic = publisher.topic("front/detections");
    subscriber.wait_for_payload(&status_topic, b"online");

    let progress = Arc::new(AtomicU32::new(0));
    let producer = {
        let (publisher, topic, progress) = (publisher.clone(), data_topic.clone(), Arc::clone(&progress));
        std::thread::spawn(move || {
            for n in 0..TOTAL {
                publisher.publish(topic.clone(), n.to_string().into_bytes(), false);
                progress.store(n + 1, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };
    wait_for_stats(&publisher, "some messages acknowledged", |s| s.published >= 100);
    let online_before = subscriber.messages(&status_topic).len();
    match outage {
        Outage::GracefulRestart => broker.stop(),
        Outage::Crash => {
            broker.freeze();
            // Messages published from now on are written to the socket but never read.
            let pile_up = (progress.load(Ordering::SeqCst) + 30).min(TOTAL);
            wait_for_stats(&publisher, "publishes to pile up unacknowledged", |s| {
                s.queued > 0 && progress.load(Ordering::SeqCst) >= pile_up
            });
            broker.kill();
        }
    }
    wait_for_stats(&publisher, "the publisher to notice the outage", |s| !s.connected);
    broker.restart();
    producer.join().expect("producer thread");

    subscriber.wait_for_payload_after(&status_topic, online_before, b"online");
    let received =
        subscriber.wait_until(&data_topic, "every sequence number", |m| sequence_numbers(m).len() == TOTAL as usize);
    assert_eq!(sequence_numbers(&received), (0..TOTAL).collect());
    let stats = wait_for_stats(&publisher, "the queue to drain", |s| s.queued == 0);
    assert!(stats.reconnects >= 1, "{stats:?}");
    assert_eq!(stats.dropped, 0, "{stats:?}");
    runtime.block_on(publisher.shutdown());
}

#[test]
fn no_qos1_message_is_lost_when_the_broker_restarts_mid_stream() {
    no_qos1_message_is_lost_across(Outage::GracefulRestart, "restart-test");
}

#[test]
fn no_qos1_message_is_lost_when_the_broker_crashes_with_messages_in_flight() {
    no_qos1_message_is_lost_across(Outage::Crash, "crash-test");
}

#[test]
fn full_queue_drops_the_oldest_while_the_broker_is_down() {
    const CAPACITY: u32 = 20;
    const EXTRA: u32 = 15;
    let mut broker = Broker::start();
    let subscriber = Subscriber::connect(&broker, "bound-sub", &["bound-test/#"]);
    let runtime = runtime();
    let publisher = start(&runtime, settings(&broker, "bound-test", 1, CAPACITY as usize));
    subscriber.wait_for_payload("bound-test/status", b"online");
    wait_for_stats(&publisher, "the online status to be acknowledged", |s| s.queued == 0);

    broker.stop();
    wait_for_stats(&publisher, "the publisher to notice the outage", |s| !s.connected);
    for n in 0..CAPACITY + EXTRA {
        publisher.publish(publisher.topic("front/detections"), n.to_string().into_bytes(), false);
    }
    let stats = publisher.stats();
    assert_eq!((stats.dropped, stats.queued), (u64::from(EXTRA), CAPACITY as usize), "{stats:?}");

    broker.restart();
    let received = subscriber.wait_until("bound-test/front/detections", "the newest messages", |m| {
        sequence_numbers(m).len() >= CAPACITY as usize
    });
    assert_eq!(sequence_numbers(&received), (EXTRA..CAPACITY + EXTRA).collect());
    wait_for_stats(&publisher, "the queue to drain", |s| s.queued == 0);
    runtime.block_on(publisher.shutdown());
    assert_eq!(sequence_numbers(&subscriber.messages("bound-test/front/detections")).len(), CAPACITY as usize);
}

#[test]
fn tls_and_password_from_a_file() {
    let broker = Broker::start_secured("jetson", "pass word");
    let dir = tempfile::tempdir().expect("tempdir");
    let password_file = dir.path().join("password");
    std::fs::write(&password_file, "pass word\n").expect("write password file");
    let mqtt = format!(
        "username = \"jetson\"\npassword_file = {:?}\ntls = {{ ca_file = {:?} }}",
        password_file.display().to_string(),
        broker.ca_file().display().to_string()
    );
    let runtime = runtime();
    let publisher = start(&runtime, settings_with(&broker, "tls-test", 1, 10, &mqtt));
    publisher.publish(publisher.topic("front/detections"), b"over tls".to_vec(), false);
    // `online` and the message acknowledged: the TLS handshake and the login worked.
    let stats = wait_for_stats(&publisher, "both messages acknowledged", |s| s.published == 2);
    assert!(stats.connected, "{stats:?}");
    runtime.block_on(publisher.shutdown());
}

#[test]
fn shutdown_during_an_outage_ends_after_the_flush_window_not_the_backoff() {
    let mut broker = Broker::start();
    let subscriber = Subscriber::connect(&broker, "outage-sub", &["outage-test/status"]);
    let runtime = runtime();
    let mut settings = settings(&broker, "outage-test", 1, 10);
    // A backoff far beyond the test's failure guard: shutdown must not wait for it.
    settings.reconnect_min = WAIT * 4;
    settings.reconnect_max = WAIT * 4;
    settings.shutdown_flush = Duration::from_millis(100);
    let publisher = start(&runtime, settings);
    subscriber.wait_for_payload("outage-test/status", b"online");

    broker.stop();
    wait_for_stats(&publisher, "the publisher to notice the outage", |s| !s.connected);
    for n in 0..3u32 {
        publisher.publish(publisher.topic("front/detections"), n.to_string().into_bytes(), false);
    }
    let shutdown = runtime.block_on(async { tokio::time::timeout(WAIT, publisher.shutdown()).await });
    assert!(shutdown.is_ok(), "shutdown() waited for the reconnect backoff");
    let stats = publisher.stats();
    assert_eq!((stats.connected, stats.queued, stats.dropped), (false, 4, 0), "3 messages + offline stay unsent");
}

/// Two daemons with one client id (two devices from one cloned SD card): the broker closes each
/// one's session when the other connects. Each notices the streak of sessions closed right after
/// CONNACK, says so (`takeovers` in its stats, an error in its log) and backs off to
/// `reconnect_max` instead of reconnecting every `reconnect_min` and flapping the status topic.
#[test]
fn two_clients_with_one_client_id_back_off_instead_of_flapping() {
    let broker = Broker::start();
    let runtime = runtime();
    let twin = || {
        let mut settings = settings(&broker, "it-takeover", 1, 100);
        settings.reconnect_min = Duration::from_millis(50);
        settings.reconnect_max = Duration::from_secs(30);
        settings
    };
    let (first, second) = (start(&runtime, twin()), start(&runtime, twin()));
    let deadline = Instant::now() + WAIT;
    while first.stats().takeovers + second.stats().takeovers == 0 {
        assert!(Instant::now() < deadline, "no takeover seen: {:?} {:?}", first.stats(), second.stats());
        std::thread::sleep(Duration::from_millis(20));
    }
    // Forty reconnect_min periods: flapping twins would reconnect about forty times each.
    let reconnects = || first.stats().reconnects + second.stats().reconnects;
    let before = reconnects();
    std::thread::sleep(Duration::from_millis(50) * 40);
    let during = reconnects() - before;
    assert!(during <= 2, "{during} reconnects in 40 reconnect_min periods after the takeover was seen");
}

/// A broker that restarts is reconnected as soon as it accepts connections again, not when a
/// backoff that grew during the outage runs out: here the backoff is far beyond the test's failure
/// guard, so only the probe of the port can bring the publisher back in time.
#[test]
fn a_broker_that_comes_back_is_reconnected_without_waiting_out_the_backoff() {
    let mut broker = Broker::start();
    let runtime = runtime();
    let mut settings = settings(&broker, "comeback-test", 1, 10);
    settings.reconnect_min = WAIT * 4;
    settings.reconnect_max = WAIT * 4;
    let publisher = start(&runtime, settings);
    wait_for_stats(&publisher, "the first connection", |s| s.connected);
    for outage in 1..=2 {
        broker.stop();
        wait_for_stats(&publisher, "the publisher to notice the outage", |s| !s.connected);
        broker.restart();
        let stats = wait_for_stats(&publisher, "the reconnection", |s| s.connected);
        assert_eq!(stats.reconnects, outage, "{stats:?}");
    }
    runtime.block_on(publisher.shutdown());
}

/// A broker that answers and refuses us (here: a wrong password) is not probed: the backoff alone
/// paces the attempts, so a misconfigured daemon does not hammer it.
#[test]
fn a_broker_that_refuses_us_is_retried_at_the_backoffs_pace() {
    let broker = Broker::start_secured("jetson", "right");
    let dir = tempfile::tempdir().expect("tempdir");
    let password_file = dir.path().join("password");
    std::fs::write(&password_file, "wrong\n").expect("write password file");
    let mqtt = format!(
        "username = \"jetson\"\npassword_file = {:?}\ntls = {{ ca_file = {:?} }}",
        password_file.display().to_string(),
        broker.ca_file().display().to_string()
    );
    let runtime = runtime();
    let mut settings = settings_with(&broker, "refused-test", 1, 10, &mqtt);
    let backoff = Duration::from_secs(2);
    (settings.reconnect_min, settings.reconnect_max) = (backoff, backoff);
    let _publisher = start(&runtime, settings);
    let attempts = || broker.log().matches("New connection from").count();
    let deadline = Instant::now() + WAIT;
    while attempts() == 0 {
        assert!(Instant::now() < deadline, "no connection attempt; broker log:\n{}", broker.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    // Two backoff periods: at most three attempts; probing every half second would make eight.
    let before = attempts();
    std::thread::sleep(backoff * 2);
    let during = attempts() - before;
    assert!(during <= 3, "{during} attempts in two backoff periods; broker log:\n{}", broker.log());
}

/// Issue 35.8: a broker restarting every two seconds ends each session soon after its CONNACK,
/// like a client that takes the session over; but between two sessions nothing listens on its
/// port, which a takeover never shows. No takeover is reported, and the publisher keeps
/// reconnecting at `reconnect_min`'s pace instead of the takeover's `reconnect_max`.
#[test]
fn a_broker_restarting_every_two_seconds_is_no_takeover() {
    let mut broker = Broker::start();
    let runtime = runtime();
    let mut settings = settings(&broker, "restart-loop-test", 1, 10);
    settings.reconnect_max = WAIT * 4;
    let publisher = start(&runtime, settings);
    wait_for_stats(&publisher, "the first connection", |s| s.connected);
    for restart in 1..=5 {
        broker.stop();
        wait_for_stats(&publisher, "the publisher to notice the restart", |s| !s.connected);
        broker.restart();
        let stats = wait_for_stats(&publisher, "the reconnection", |s| s.connected);
        assert_eq!((stats.reconnects, stats.takeovers), (restart, 0), "{stats:?}");
    }
    runtime.block_on(publisher.shutdown());
}

/// While the engine is built at start the daemon is connected and says so: the retained status is
/// `building` (also for a subscriber that comes later), then `online` once the engine is ready.
#[test]
fn the_status_is_building_until_the_engine_is_ready_then_online() {
    let broker = Broker::start();
    let subscriber = Subscriber::connect(&broker, "building-sub", &["building-test/status"]);
    let runtime = runtime();
    let publisher = {
        let _entered = runtime.enter();
        Publisher::start_with_status(settings(&broker, "building-test", 1, 100), STATUS_BUILDING, None)
            .expect("publisher starts")
    };
    subscriber.wait_for_payload("building-test/status", b"building");
    let late = Subscriber::connect(&broker, "building-late-sub", &["building-test/status"]);
    assert!(late.wait_for_payload("building-test/status", b"building")[0].retain, "retained");
    publisher.set_status(STATUS_ONLINE);
    subscriber.wait_for_payload("building-test/status", b"online");
    let payloads: Vec<String> = subscriber.messages("building-test/status").iter().map(|m| m.text()).collect();
    assert_eq!(payloads, ["building", "online"]);
    runtime.block_on(publisher.shutdown());
    subscriber.wait_for_payload("building-test/status", b"offline");
}
