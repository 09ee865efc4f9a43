//! Test harness shared by every module that talks MQTT: a real mosquitto broker on a free loopback
//! port, and a [`Subscriber`] that collects what the broker delivers, per topic.
//!
//! The broker runs with persistence in its own temporary directory, so [`Broker::stop`] (SIGTERM)
//! followed by [`Broker::restart`] keeps persistent subscriber sessions, their queued QoS ≥ 1
//! messages and retained messages, like a production broker restart. It is killed on drop.
//!
//! ```ignore
//! let broker = Broker::start();
//! let subscriber = Subscriber::connect(&broker, "my-test-sub", &["my-test/#"]);
//! // … point the code under test at 127.0.0.1:broker.port(), topic prefix "my-test" …
//! subscriber.wait_for_payload("my-test/status", b"online");
//! ```
//!
//! Waits take [`WAIT`] as a failure guard only; nothing here measures time.

use std::collections::HashMap;
use std::fs;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rumqttc::{Client, Event, MqttOptions, Packet, QoS, SubscribeFilter};

/// Upper bound for every wait in the harness: long enough for a loaded CI machine, and only ever
/// reached when something is broken.
pub const WAIT: Duration = Duration::from_secs(30);

/// A mosquitto process listening on `127.0.0.1:port()`.
pub struct Broker {
    port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
    secured: bool,
}

impl Broker {
    /// Starts a broker on a free port. Panics with install instructions when mosquitto is missing.
    pub fn start() -> Broker {
        Self::start_in(temp_dir(), false)
    }

    /// Starts a broker that accepts only TLS (a fresh CA, see [`Broker::ca_file`]; the server
    /// certificate names `127.0.0.1` and `localhost`) and only `username` with `password`.
    /// Needs the `openssl` and `mosquitto_passwd` commands.
    pub fn start_secured(username: &str, password: &str) -> Broker {
        let dir = temp_dir();
        make_test_certificates(dir.path());
        let passwd = dir.path().join("passwd");
        run_tool(Command::new("mosquitto_passwd").arg("-b").arg("-c").arg(&passwd).arg(username).arg(password));
        Self::start_in(dir, true)
    }

    /// PEM CA certificate that signs a secured broker's certificate.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    fn start_in(dir: tempfile::TempDir, secured: bool) -> Broker {
        let mut broker = Broker { port: 0, dir, child: None, secured };
        // Another process can take the port between our probe and mosquitto's bind; try a few.
        for _ in 0..5 {
            broker.port = free_port();
            if broker.spawn() {
                return broker;
            }
        }
        panic!("mosquitto did not start on a free port; its log:\n{}", broker.log());
    }

    pub fn host(&self) -> &'static str {
        "127.0.0.1"
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Stops the broker gracefully (SIGTERM, then waits): it saves its persistence file, and its
    /// clients see the connection close.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if !signal(&child, "TERM") {
            let _ = child.kill();
        }
        let _ = child.wait();
    }

    /// Freezes the broker (SIGSTOP): connections stay open but nothing is read or acknowledged, so
    /// publishes pile up in flight. Follow with [`Broker::kill`] to simulate a crash mid-stream.
    pub fn freeze(&self) {
        let child = self.child.as_ref().expect("freeze() needs a running broker");
        assert!(signal(child, "STOP"), "cannot SIGSTOP mosquitto");
    }

    /// Kills the broker (SIGKILL) like a crash: what it had not read is gone, and state not yet
    /// autosaved is lost. The harness autosaves after every change, so subscriber sessions and
    /// the messages queued for them survive.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops the broker if it runs, then starts it again on the same port with the same persistence.
    pub fn restart(&mut self) {
        self.stop();
        // The port was ours a moment ago; a socket in TIME_WAIT can delay the bind briefly.
        let deadline = Instant::now() + WAIT;
        while !self.spawn() {
            assert!(Instant::now() < deadline, "mosquitto did not restart on port {}; log:\n{}", self.port, self.log());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Stops the broker and starts it again on the same port without what it had persisted: every
    /// retained message and session is gone, as after a restart of a broker without persistence.
    /// (Only the Home Assistant test, x86_64 only, needs it.)
    #[cfg(target_arch = "x86_64")]
    pub fn restart_forgetting(&mut self) {
        self.stop();
        let _ = fs::remove_file(self.dir.path().join("mosquitto.db"));
        self.restart();
    }

    /// The broker's log so far, for assertion messages.
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join("mosquitto.log")).unwrap_or_default()
    }

    /// Starts mosquitto and waits until it accepts connections; false if it exited (port taken).
    fn spawn(&mut self) -> bool {
        let config = self.write_config();
        let child = Command::new(mosquitto_binary())
            .arg("-c")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run mosquitto: {e}"));
        self.child = Some(child);
        let deadline = Instant::now() + WAIT;
        loop {
            if TcpStream::connect((self.host(), self.port)).is_ok() {
                return true;
            }
            let exited = self.child.as_mut().map(|c| c.try_wait());
            if matches!(exited, Some(Ok(Some(_))) | Some(Err(_))) {
                self.child = None;
                return false;
            }
            assert!(Instant::now() < deadline, "mosquitto did not listen on port {}; log:\n{}", self.port, self.log());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn write_config(&self) -> PathBuf {
        let dir = self.dir.path();
        let path = dir.join("mosquitto.conf");
        let config = format!(
            "listener {port} 127.0.0.1\n\
             {access}\
             allow_anonymous {anonymous}\n\
             persistence true\n\
             persistence_location {dir}/\n\
             persistence_file mosquitto.db\n\
             autosave_interval 1\n\
             autosave_on_changes true\n\
             log_dest file {dir}/mosquitto.log\n\
             log_type error\nlog_type warning\nlog_type notice\nlog_type information\n\
             connection_messages true\n\
             max_queued_messages 100000\n\
             max_inflight_messages 0\n\
             set_tcp_nodelay true\n\
             # Only used when running as root: stay root so the temp directory stays writable.\n\
             user root\n",
            port = self.port,
            dir = dir.display(),
            anonymous = !self.secured,
            access = if self.secured {
                format!(
                    "cafile {dir}/ca.pem\ncertfile {dir}/server.pem\nkeyfile {dir}/server.key\n\
                     password_file {dir}/passwd\n",
                    dir = dir.display()
                )
            } else {
                String::new()
            },
        );
        fs::write(&path, config).expect("write mosquitto.conf");
        path
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.kill();
    }
}

fn signal(child: &Child, name: &str) -> bool {
    Command::new("kill").arg(format!("-{name}")).arg(child.id().to_string()).status().is_ok_and(|s| s.success())
}

fn mosquitto_binary() -> PathBuf {
    let in_path = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).map(|dir| dir.join("mosquitto")).collect::<Vec<_>>())
        .unwrap_or_default();
    let standard = ["/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto"].map(PathBuf::from);
    in_path.into_iter().chain(standard).find(|p| p.is_file()).unwrap_or_else(|| {
        panic!(
            "the MQTT integration tests need the mosquitto broker: \
             `apt-get install mosquitto` (Debian/Ubuntu), then run the tests again"
        )
    })
}

fn temp_dir() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("jetson-detectd-mosquitto").tempdir().expect("temp dir for mosquitto")
}

/// A CA and a server certificate for 127.0.0.1/localhost, valid for a century (P-256 keys):
/// `ca.pem`, `server.pem` and `server.key` in `dir`.
pub fn make_test_certificates(dir: &Path) {
    let path = |name: &str| dir.join(name);
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    run_tool(
        Command::new("openssl")
            .args(["req", "-x509", "-days", "36500", "-subj", "/CN=jetson-detectd test CA"])
            .args(ec)
            .args(["-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign"])
            .arg("-keyout")
            .arg(path("ca.key"))
            .arg("-out")
            .arg(path("ca.pem")),
    );
    run_tool(
        Command::new("openssl")
            .args(["req", "-subj", "/CN=localhost"])
            .args(ec)
            .arg("-keyout")
            .arg(path("server.key"))
            .arg("-out")
            .arg(path("server.csr")),
    );
    fs::write(
        path("server.ext"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .expect("write server.ext");
    run_tool(
        Command::new("openssl")
            .args(["x509", "-req", "-days", "36500", "-CAcreateserial"])
            .arg("-in")
            .arg(path("server.csr"))
            .arg("-CA")
            .arg(path("ca.pem"))
            .arg("-CAkey")
            .arg(path("ca.key"))
            .arg("-extfile")
            .arg(path("server.ext"))
            .arg("-out")
            .arg(path("server.pem")),
    );
}

fn run_tool(command: &mut Command) {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("cannot run {command:?} ({e}); install openssl and mosquitto (mosquitto_passwd)"));
    assert!(output.status.success(), "{command:?} failed: {}", String::from_utf8_lossy(&output.stderr));
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free loopback port");
    listener.local_addr().expect("local addr").port()
}

/// One delivered message.
#[derive(Debug, Clone, PartialEq)]
pub struct Received {
    pub topic: String,
    pub payload: Vec<u8>,
    /// Set for retained messages delivered because of a (re)subscription, not for live ones.
    pub retain: bool,
    pub qos: QoS,
}

impl Received {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.payload).into_owned()
    }
}

#[derive(Default)]
struct Inbox {
    by_topic: HashMap<String, Vec<Received>>,
    /// Every message, in arrival order across topics.
    arrived: Vec<Received>,
    subscribed: bool,
}

/// A separate MQTT client with a persistent session (clean_session false) and QoS 1 subscriptions:
/// it keeps collecting across broker restarts, and the broker queues for it while it is away.
pub struct Subscriber {
    inbox: Arc<(Mutex<Inbox>, Condvar)>,
    client: Client,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Subscriber {
    /// Connects as `client_id` (unique per test), subscribes to `filters` (wildcards allowed) and
    /// returns once the broker has acknowledged the subscription, so nothing published afterwards
    /// is missed. Retained messages on the filters arrive first, with `retain` set.
    pub fn connect(broker: &Broker, client_id: &str, filters: &[&str]) -> Subscriber {
        let mut options = MqttOptions::new(client_id, broker.host(), broker.port());
        options
            .set_clean_session(false)
            .set_keep_alive(Duration::from_secs(5))
            .set_max_packet_size(16 * 1024 * 1024, 64 * 1024);
        let (client, mut connection) = Client::new(options, 64);
        let filters: Vec<SubscribeFilter> =
            filters.iter().map(|f| SubscribeFilter::new((*f).to_string(), QoS::AtLeastOnce)).collect();
        let inbox = Arc::new((Mutex::new(Inbox::default()), Condvar::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (inbox, stop, client) = (Arc::clone(&inbox), Arc::clone(&stop), client.clone());
            std::thread::spawn(move || {
                for event in connection.iter() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    match event {
                        // A resumed session keeps its subscriptions; subscribing again would
                        // replay retained messages and make stale state look fresh.
                        Ok(Event::Incoming(Packet::ConnAck(ack))) if !ack.session_present => {
                            let _ = client.try_subscribe_many(filters.clone());
                        }
                        Ok(Event::Incoming(Packet::SubAck(_))) => {
                            lock(&inbox.0).subscribed = true;
                            inbox.1.notify_all();
                        }
                        Ok(Event::Incoming(Packet::Publish(publish))) => {
                            let received = Received {
                                topic: publish.topic.clone(),
                                payload: publish.payload.to_vec(),
                                retain: publish.retain,
                                qos: publish.qos,
                            };
                            let mut messages = lock(&inbox.0);
                            messages.arrived.push(received.clone());
                            messages.by_topic.entry(publish.topic).or_default().push(received);
                            drop(messages);
                            inbox.1.notify_all();
                        }
                        Ok(_) => {}
                        Err(_) => std::thread::sleep(Duration::from_millis(50)),
                    }
                }
            })
        };
        let subscriber = Subscriber { inbox, client, stop, thread: Some(thread) };
        let (guard, timeout) = subscriber
            .inbox
            .1
            .wait_timeout_while(lock(&subscriber.inbox.0), WAIT, |inbox| !inbox.subscribed)
            .unwrap_or_else(PoisonError::into_inner);
        assert!(!timeout.timed_out(), "subscriber {client_id} got no SUBACK; broker log:\n{}", broker.log());
        drop(guard);
        subscriber
    }

    /// Everything received on every topic so far, in arrival order (which says what the daemon
    /// sent before what: it publishes through one connection).
    pub fn all_messages(&self) -> Vec<Received> {
        lock(&self.inbox.0).arrived.clone()
    }

    /// Everything received on `topic` so far, in arrival order.
    pub fn messages(&self, topic: &str) -> Vec<Received> {
        lock(&self.inbox.0).by_topic.get(topic).cloned().unwrap_or_default()
    }

    /// Waits until `done` holds for the messages received on `topic` and returns them; panics
    /// after [`WAIT`] naming `what` and showing what did arrive.
    pub fn wait_until(&self, topic: &str, what: &str, done: impl Fn(&[Received]) -> bool) -> Vec<Received> {
        self.wait_until_within(WAIT, topic, what, done)
    }

    /// [`Subscriber::wait_until`] with another bound: messages that need frames processed by a
    /// daemon wait [`crate::pace::Pace::daemon_wait`].
    pub fn wait_until_within(
        &self,
        wait: Duration,
        topic: &str,
        what: &str,
        done: impl Fn(&[Received]) -> bool,
    ) -> Vec<Received> {
        let deadline = Instant::now() + wait;
        let mut inbox = lock(&self.inbox.0);
        loop {
            let messages = inbox.by_topic.get(topic).map(Vec::as_slice).unwrap_or_default();
            if done(messages) {
                return messages.to_vec();
            }
            let now = Instant::now();
            if now >= deadline {
                let shown: Vec<String> = messages.iter().rev().take(20).map(Received::text).collect();
                panic!("timed out waiting on {topic} for {what}; {} received, newest first: {shown:?}", messages.len());
            }
            inbox = self.inbox.1.wait_timeout(inbox, deadline - now).unwrap_or_else(PoisonError::into_inner).0;
        }
    }

    /// Publishes `payload` on `topic` (QoS 1, not retained) and waits until it comes back: every
    /// message the broker had for this subscriber on `topic` before, a retained one included, came
    /// first (a broker keeps one topic's messages in order). Returns what came before it.
    pub fn barrier(&self, topic: &str, payload: &[u8]) -> Vec<Received> {
        let seen = self.messages(topic).len();
        self.client.publish(topic, QoS::AtLeastOnce, false, payload.to_vec()).expect("publish the barrier");
        let messages = self.wait_for_payload_after(topic, seen, payload);
        let at = messages.iter().skip(seen).position(|m| m.payload == payload).unwrap_or_default();
        messages[..seen + at].to_vec()
    }

    /// Waits until the newest message on `topic` is `payload`.
    pub fn wait_for_payload(&self, topic: &str, payload: &[u8]) -> Vec<Received> {
        let what = format!("latest payload {:?}", String::from_utf8_lossy(payload));
        self.wait_until(topic, &what, |m| m.last().is_some_and(|m| m.payload == payload))
    }

    /// Waits until a message with `payload` arrives on `topic` after the first `seen` messages.
    pub fn wait_for_payload_after(&self, topic: &str, seen: usize, payload: &[u8]) -> Vec<Received> {
        let what = format!("{:?} after the first {seen} messages", String::from_utf8_lossy(payload));
        self.wait_until(topic, &what, |m| m.iter().skip(seen).any(|m| m.payload == payload))
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.client.try_disconnect();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
