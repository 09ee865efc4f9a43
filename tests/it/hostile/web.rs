//! The web server under attack (issue 35): a page whose name was rebound to this machine, a flood
//! of half-open connections, and a write whose body never comes (many readers of one picture:
//! [`super::pictures`]).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::broker::{Broker, Received, Subscriber};
use crate::daemon::{sample_source, RunningDaemon};
use crate::http::{http_address, request};
use crate::pace::Pace;

use super::{shared_dir, web_config};

/// The server's own bounds (`jetson_detectd::http::connections` and `::admission`), as the docs
/// state them.
const MAX_CONNECTIONS: usize = 64;
const MAX_CONNECTIONS_PER_CLIENT: usize = 16;
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a write's body may take (`jetson_detectd::http::server::BODY_TIMEOUT`).
const BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// The process's open descriptors, and how many of them are sockets.
fn open_descriptors(pid: u32) -> (usize, usize) {
    let targets: Vec<_> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|entries| entries.filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok()).collect())
        .unwrap_or_default();
    let sockets = targets.iter().filter(|target| target.to_string_lossy().starts_with("socket:")).count();
    (targets.len(), sockets)
}

/// A page on `attacker.example`, rebound to 127.0.0.1, used to read the pictures and save zones on
/// the default config (loopback, no token). Every request naming another host is 421, and the
/// zones file is never written; the server's own address and `localhost` still work.
#[test]
fn a_request_naming_another_host_reads_nothing_and_saves_no_zone() {
    let dir = shared_dir();
    let config = web_config(1, "hostile-rebinding", dir.path())
        .camera("front", 2.0, &sample_source("dog.jpg", "loop"))
        .write(&dir.path().join("config.toml"));
    let mut daemon = RunningDaemon::start(&config, &[]);
    let address = http_address(&mut daemon);
    let port = address.port();
    let zone = br#"{"zones":[{"name":"all","polygon":[[0,0],[1,0],[1,1]]}]}"#;
    let rebound = format!("attacker.example:{port}");
    let origin = format!("http://{rebound}");
    for (method, path, body) in [
        ("GET", "/api/cameras/front/latest.jpg", &b""[..]),
        ("GET", "/api/status", &b""[..]),
        ("GET", "/", &b""[..]),
        ("PUT", "/api/cameras/front/zones", &zone[..]),
    ] {
        let headers = [("Host", rebound.as_str()), ("Origin", origin.as_str()), ("Content-Type", "application/json")];
        let answer = request(address, method, path, &headers, body);
        assert_eq!(answer.status, 421, "{method} {path} with Host {rebound}: {}", answer.text());
        assert!(answer.text().contains("http.allowed_hosts"), "{}", answer.text());
    }
    assert!(!dir.path().join("zones.toml").exists(), "a refused write changes nothing");
    for host in [address.to_string(), format!("localhost:{port}")] {
        let answer = request(address, "GET", "/api/status", &[("Host", host.as_str())], b"");
        assert_eq!(answer.status, 200, "Host {host}: {}", answer.text());
    }
}

/// Raises this test process's soft limit on open files to its hard limit: the flood below holds
/// hundreds of sockets while other tests run in the same process.
fn raise_own_open_files_limit() -> u64 {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit and setrlimit read or write one valid `rlimit` for the duration of the call.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0, "getrlimit");
        limit.rlim_cur = limit.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
    }
    limit.rlim_cur
}

/// Frames the camera `front` processed, as telemetry last reported.
fn telemetry_frames(reports: &[Received]) -> u64 {
    reports
        .iter()
        .filter_map(|report| serde_json::from_slice::<serde_json::Value>(&report.payload).ok())
        .filter_map(|report| report["cameras"]["front"]["frames"].as_u64())
        .max()
        .unwrap_or(0)
}

/// 1 100 idle connections exhausted the descriptors at systemd's default limit: the image camera
/// could not open its files and the daemon exited 1, after every restart. Now, with its open files
/// limited to [`DAEMON_OPEN_FILES`] and more half-open connections from loopback than that, the
/// daemon serves at most [`MAX_CONNECTIONS`] (a new one closes the least recently active), keeps
/// descriptors to spare, its camera goes on, an idle connection is closed (after the header
/// timeout at the latest), and the page answers again once the flood ends.
#[test]
fn half_open_connections_neither_exhaust_descriptors_nor_stop_the_camera() {
    /// The daemon's limit: 64 kept for itself and 16 for the camera leave room for 64 connections.
    const DAEMON_OPEN_FILES: u64 = 160;
    const FLOOD: usize = 400;
    let prefix = "hostile-flood";
    let broker = Broker::start();
    let dir = shared_dir();
    let config = web_config(broker.port(), prefix, dir.path())
        .set("telemetry", "interval_s", "1")
        .camera("front", 4.0, &sample_source("chelsea.png", "loop"))
        .write(&dir.path().join("config.toml"));
    let telemetry = format!("{prefix}/telemetry");
    let subscriber = Subscriber::connect(&broker, "hostile-flood-sub", &[&telemetry]);
    let mut daemon = RunningDaemon::start_with(&config, &[], |command| {
        // SAFETY: setrlimit is async-signal-safe and touches only the child's own limits.
        unsafe {
            command.pre_exec(|| {
                let limit = libc::rlimit { rlim_cur: DAEMON_OPEN_FILES, rlim_max: DAEMON_OPEN_FILES };
                match libc::setrlimit(libc::RLIMIT_NOFILE, &limit) {
                    0 => Ok(()),
                    _ => Err(std::io::Error::last_os_error()),
                }
            });
        }
    });
    let address = http_address(&mut daemon);
    daemon.wait_for_messages(&subscriber, &telemetry, "the first frames", |m| telemetry_frames(m) >= 1);

    let own_limit = raise_own_open_files_limit();
    let flood = FLOOD.min(usize::try_from(own_limit / 2).unwrap_or(FLOOD));
    let mut connections: Vec<TcpStream> = Vec::new();
    let mut refused = 0;
    while connections.len() < flood && refused < 3 {
        // Beyond the listen queue the kernel drops the handshake: the flood is as large as it gets.
        match TcpStream::connect_timeout(&address, Duration::from_millis(500)) {
            Ok(stream) => connections.push(stream),
            Err(_) => refused += 1,
        }
    }
    assert!(
        connections.len() as u64 > DAEMON_OPEN_FILES,
        "only {} connections opened: the flood must exceed the daemon's {DAEMON_OPEN_FILES} descriptors",
        connections.len()
    );
    let before = telemetry_frames(&subscriber.messages(&telemetry));
    daemon.wait_for_messages(&subscriber, &telemetry, "frames during the flood", |m| telemetry_frames(m) >= before + 3);
    assert!(daemon.is_running(), "{}", daemon.log());
    let (open, sockets) = open_descriptors(daemon.pid());
    assert!(
        open as u64 + 16 <= DAEMON_OPEN_FILES,
        "{open} of {DAEMON_OPEN_FILES} descriptors open during a flood of {}: the camera and the broker need some",
        connections.len()
    );
    // Besides the connections: the listener, the broker's and the log's sockets.
    assert!(sockets <= MAX_CONNECTIONS + 8, "{sockets} sockets open: more connections than the cap");

    // The first connection was accepted and has sent nothing: the server closes it.
    let first = &mut connections[0];
    first.set_read_timeout(Some(HEADER_TIMEOUT + Pace::measured().daemon_wait())).expect("timeout");
    let started = Instant::now();
    let closed = match first.read(&mut [0u8; 16]) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
    };
    assert!(closed, "an idle connection stays open after {:?}", started.elapsed());

    drop(connections);
    let answer = request(address, "GET", "/healthz", &[], b"");
    assert_eq!(answer.status, 200, "{}", answer.text());
    daemon.signal(libc::SIGTERM);
    assert_eq!(daemon.wait_exit().code(), Some(0), "{}", daemon.log());
}

/// `GET /healthz` on a kept-alive `stream`, its answer read whole; `false` when the connection
/// failed or was closed.
fn ask_health(stream: &mut BufReader<TcpStream>, address: SocketAddr) -> bool {
    let request = format!("GET /healthz HTTP/1.1\r\nHost: {address}\r\n\r\n");
    if stream.get_mut().write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut length = None;
    loop {
        let mut line = String::new();
        match stream.read_line(&mut line) {
            Ok(0) | Err(_) => return false,
            Ok(_) if line == "\r\n" => break,
            Ok(_) => {
                let lower = line.to_ascii_lowercase();
                length = lower.strip_prefix("content-length:").and_then(|n| n.trim().parse::<usize>().ok()).or(length);
            }
        }
    }
    let mut body = vec![0u8; length.unwrap_or(0)];
    stream.read_exact(&mut body).is_ok()
}

/// A client that held the server's 64 keep-alive connections with a cheap `GET` every 8 s (reads
/// need no token) starved the page, the API, `/healthz` and `/metrics`: no answer in 30 s. Now
/// one client holds at most [`MAX_CONNECTIONS_PER_CLIENT`], and a newcomer (here from the same
/// loopback address, as a page through an SSH tunnel is) is answered at once.
#[test]
fn a_client_holding_every_connection_with_cheap_requests_keeps_nobody_out() {
    let dir = shared_dir();
    let config = web_config(1, "hostile-held", dir.path())
        .camera("front", 2.0, &sample_source("dog.jpg", "loop"))
        .write(&dir.path().join("config.toml"));
    let mut daemon = RunningDaemon::start(&config, &[]);
    let address = http_address(&mut daemon);
    let stop = Arc::new(AtomicBool::new(false));
    let (rounds, held) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let holder = {
        let (stop, rounds, held) = (stop.clone(), rounds.clone(), held.clone());
        std::thread::spawn(move || {
            let mut streams: Vec<BufReader<TcpStream>> = (0..MAX_CONNECTIONS)
                .filter_map(|_| TcpStream::connect(address).ok())
                .map(|stream| {
                    stream.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
                    BufReader::new(stream)
                })
                .collect();
            while !stop.load(Ordering::SeqCst) {
                streams.retain_mut(|stream| ask_health(stream, address));
                held.store(streams.len(), Ordering::SeqCst);
                rounds.fetch_add(1, Ordering::SeqCst);
                // Well within the header timeout: these connections are never idle long enough.
                for _ in 0..20 {
                    if !stop.load(Ordering::SeqCst) {
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }
            }
        })
    };
    daemon.wait_until("the holder's second round", || rounds.load(Ordering::SeqCst) >= 2);
    let kept = held.load(Ordering::SeqCst);
    assert!(kept <= MAX_CONNECTIONS_PER_CLIENT, "one client holds {kept} connections");
    for path in ["/healthz", "/api/status", "/metrics", "/"] {
        let started = Instant::now();
        let answer = request(address, "GET", path, &[], b"");
        assert_eq!(answer.status, 200, "{path}: {}", answer.text());
        println!("{path} answered in {:?} beside a client holding {kept} connections", started.elapsed());
    }
    stop.store(true, Ordering::SeqCst);
    holder.join().expect("the holder");
    daemon.signal(libc::SIGTERM);
    assert_eq!(daemon.wait_exit().code(), Some(0), "{}", daemon.log());
}

/// A client that sent a write's head and then trickled its body, or sent nothing more, kept its
/// connection for as long as it liked: 64 of them took every place. The whole body must now come
/// within the guard's deadline: 408, the connection closed, nothing saved.
#[test]
fn a_write_whose_body_does_not_come_is_answered_408_and_its_connection_closed() {
    let dir = shared_dir();
    let config = web_config(1, "hostile-slow-body", dir.path())
        .camera("front", 2.0, &sample_source("dog.jpg", "loop"))
        .write(&dir.path().join("config.toml"));
    let mut daemon = RunningDaemon::start(&config, &[]);
    let address = http_address(&mut daemon);
    let mut stream = TcpStream::connect(address).expect("connect");
    let head = format!(
        "PUT /api/cameras/front/zones HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n\
         Content-Length: 100\r\n\r\n{{\"zones\""
    );
    stream.write_all(head.as_bytes()).expect("send the head and the body's first bytes");
    stream.set_read_timeout(Some(BODY_TIMEOUT + Pace::measured().daemon_wait())).expect("timeout");
    let mut answer = Vec::new();
    let closed = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(closed.is_ok(), "no answer and still open: {closed:?}, {answer:?}");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(!dir.path().join("zones.toml").exists(), "nothing saved");
    assert!(daemon.is_running(), "{}", daemon.log());
}

/// A port conflict published `building` and `online` before exiting 78, and 78 means systemd never
/// retries, although a port busy for a moment at boot is no config error. Now the port is bound
/// before anything is announced: the start ends with exit 1 (systemd retries), naming
/// `http.listen`, and the broker never hears of it.
#[test]
fn a_busy_port_ends_the_start_before_anything_is_announced_with_a_status_systemd_retries() {
    let prefix = "hostile-busy-port";
    let broker = Broker::start();
    let dir = shared_dir();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = taken.local_addr().expect("address");
    let config = web_config(broker.port(), prefix, dir.path())
        .set("http", "listen", &format!("\"{address}\""))
        .set("mqtt", "shutdown_flush_ms", "1000")
        .camera("front", 2.0, &sample_source("dog.jpg", "loop"))
        .write(&dir.path().join("config.toml"));
    let status = format!("{prefix}/status");
    let subscriber = Subscriber::connect(&broker, "hostile-busy-port-sub", &[&status]);
    let outcome = super::run_command("a busy port", "run", &config);
    assert_eq!(outcome.status.code(), Some(1), "{}\n{}", outcome.status, outcome.stderr);
    assert!(
        outcome.stderr.contains("http.listen") && outcome.stderr.contains(&address.to_string()),
        "{}",
        outcome.stderr
    );
    assert!(outcome.stderr.contains("in use"), "{}", outcome.stderr);
    // A retained status would reach a new subscriber before anything published after it
    // subscribed; the first subscriber saw every message.
    let late = Subscriber::connect(&broker, "hostile-busy-port-late", &[&status]);
    for (subscriber, barrier) in [(&late, "barrier-late"), (&subscriber, "barrier-first")] {
        let texts: Vec<String> = subscriber.barrier(&status, barrier.as_bytes()).iter().map(Received::text).collect();
        assert!(texts.iter().all(|text| text.starts_with("barrier-")), "the start was announced: {texts:?}");
    }
    drop(taken);
}
