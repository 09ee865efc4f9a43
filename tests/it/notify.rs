//! `Notifier`, `Liveness` and `WatchdogKeeper` against a real Unix datagram socket standing in for
//! systemd's notify socket (bound in a temp dir, or in the abstract namespace).

use std::io::ErrorKind;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::sync::Arc;
use std::time::{Duration, Instant};

use jetson_detectd::frame::Stage;
use jetson_detectd::service::notify::{Liveness, Notifier, WatchdogKeeper, WatchdogTick};

/// A bound notify socket and the notifier connected to it.
pub struct FakeSystemd {
    socket: UnixDatagram,
    _dir: tempfile::TempDir,
}

impl FakeSystemd {
    pub fn start(watchdog: Option<Duration>) -> (FakeSystemd, Notifier) {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("notify.sock");
        let socket = UnixDatagram::bind(&path).expect("bind notify socket");
        socket.set_nonblocking(true).expect("non-blocking");
        let notifier = Notifier::connect(path.as_os_str(), watchdog).expect("connect");
        (FakeSystemd { socket, _dir: dir }, notifier)
    }

    /// Every datagram received so far, each as its text.
    pub fn received(&self) -> Vec<String> {
        let mut messages = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match self.socket.recv(&mut buf) {
                Ok(n) => messages.push(String::from_utf8_lossy(&buf[..n]).into_owned()),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return messages,
                Err(e) => panic!("recv: {e}"),
            }
        }
    }
}

#[test]
fn lifecycle_messages_arrive_in_order() {
    let (systemd, notifier) = FakeSystemd::start(None);
    assert!(notifier.is_active());
    notifier.build_progress(Duration::from_secs(60), "building engine: 40%").expect("extend");
    notifier.ready().expect("ready");
    notifier.status("1 camera, 30.0 fps\nREADY=1").expect("status");
    notifier.stopping().expect("stopping");
    assert_eq!(
        systemd.received(),
        [
            "EXTEND_TIMEOUT_USEC=60000000\nSTATUS=building engine: 40%\n",
            "READY=1\n",
            "STATUS=1 camera, 30.0 fps READY=1\n",
            "STOPPING=1\n",
        ],
        "a newline inside STATUS= must not smuggle in another assignment"
    );
}

#[test]
fn abstract_namespace_sockets_work() {
    let name = format!("jetson-detectd-test-{}", std::process::id());
    let address = SocketAddr::from_abstract_name(name.as_bytes()).expect("abstract address");
    let socket = UnixDatagram::bind_addr(&address).expect("bind abstract socket");
    let notifier = Notifier::connect(format!("@{name}").as_ref(), None).expect("connect");
    notifier.ready().expect("ready");
    let mut buf = [0u8; 64];
    let n = socket.recv(&mut buf).expect("recv");
    assert_eq!(&buf[..n], b"READY=1\n");
}

#[test]
fn missing_socket_is_a_connect_error() {
    let dir = tempfile::tempdir().expect("temp dir");
    let error = Notifier::connect(dir.path().join("absent.sock").as_os_str(), None).unwrap_err();
    assert!(error.to_string().contains("absent.sock"), "{error}");
}

#[test]
fn watchdog_stops_while_a_pipeline_stalls_and_resumes_after() {
    let (systemd, notifier) = FakeSystemd::start(Some(Duration::from_secs(30)));
    let liveness = Liveness::new();
    let front = liveness.register("front");
    let back = liveness.register("back");
    let once = liveness.register("door");
    let mut keeper = WatchdogKeeper::new(Arc::new(notifier), Arc::clone(&liveness), Duration::from_secs(10));
    assert_eq!(keeper.period(), Some(Duration::from_secs(15)));

    front.beat();
    back.beat();
    once.finish();
    assert_eq!(keeper.tick_at(Instant::now()), WatchdogTick::KeptAlive);
    assert_eq!(systemd.received(), ["WATCHDOG=1\n"]);

    // Twenty seconds on without a beat, with `back` stuck in inference: both cameras are reported,
    // `back` with its stage; the finished `door` source is healthy without beats.
    back.enter(Stage::Infer);
    let later = Instant::now() + Duration::from_secs(20);
    let alive_then = liveness.all_alive_at(later, Duration::from_secs(30));
    assert_eq!(alive_then, Ok(()), "within max_silence everything is alive");
    match keeper.tick_at(later) {
        WatchdogTick::Withheld(stalls) => {
            let names: Vec<&str> = stalls.iter().map(|s| s.name.as_str()).collect();
            assert!(names.contains(&"back") && !names.contains(&"door"), "{names:?}");
            let back_stall = stalls.iter().find(|s| s.name == "back").expect("back stalled");
            assert_eq!(back_stall.stage, Some(Stage::Infer));
        }
        WatchdogTick::KeptAlive => panic!("a stalled pipeline must stop the keep-alives"),
    }
    assert!(systemd.received().is_empty(), "no WATCHDOG=1 while a pipeline stalls");

    front.beat();
    back.beat();
    assert_eq!(keeper.tick_at(Instant::now()), WatchdogTick::KeptAlive);
    assert_eq!(systemd.received(), ["WATCHDOG=1\n"]);
}

#[test]
fn a_pipeline_thread_that_dies_stops_the_watchdog() {
    let (systemd, notifier) = FakeSystemd::start(Some(Duration::from_secs(30)));
    let liveness = Liveness::new();
    let handle = liveness.register("front");
    std::thread::spawn(move || {
        handle.beat();
        // The thread ends without `finish()`, as a panicking pipeline would.
    })
    .join()
    .expect("thread");
    let mut keeper = WatchdogKeeper::new(Arc::new(notifier), liveness, Duration::from_secs(3600));
    assert!(matches!(keeper.tick_at(Instant::now()), WatchdogTick::Withheld(stalls) if stalls[0].abandoned));
    assert!(systemd.received().is_empty());
}

#[test]
fn keeper_run_returns_at_once_without_a_watchdog() {
    let keeper = WatchdogKeeper::new(Arc::new(Notifier::disabled()), Liveness::new(), Duration::from_secs(1));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().expect("runtime");
    runtime.block_on(keeper.run(std::future::pending()));
}

#[test]
fn keeper_run_sends_keep_alives_until_shutdown() {
    let (systemd, notifier) = FakeSystemd::start(Some(Duration::from_millis(20)));
    let liveness = Liveness::new();
    let _front = liveness.register("front");
    let keeper = WatchdogKeeper::new(Arc::new(notifier), Arc::clone(&liveness), Duration::from_secs(3600));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().expect("runtime");
    runtime.block_on(async {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(keeper.run(async {
            let _ = stopped.await;
        }));
        // The first tick of a tokio interval fires at once: wait for that keep-alive, then stop.
        let mut polls = 0;
        while systemd.received().is_empty() {
            polls += 1;
            assert!(polls < 2000, "no keep-alive from the running keeper");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        stop.send(()).expect("keeper still running");
        task.await.expect("keeper task");
    });
}
