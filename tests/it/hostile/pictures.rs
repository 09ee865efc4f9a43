//! Many concurrent readers of a large camera's picture (issue 35): one render per frame, bounded
//! memory, detection and shutdown unaffected. x86_64 only: under qemu-user a debug build renders
//! a 3.7 MP frame too slowly for rounds of 40 readers.

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::daemon::RunningDaemon;
use crate::http::{http_address, request};

use super::{shared_dir, web_config};

/// A field of `/proc/<pid>/status` in bytes (`VmRSS`, `VmHWM`: reported in kB).
fn proc_status_bytes(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/<pid>/status");
    let line = status.lines().find(|line| line.starts_with(field)).unwrap_or_else(|| panic!("no {field}"));
    let kb: u64 = line.split_whitespace().nth(1).and_then(|kb| kb.parse().ok()).expect("a number of kB");
    kb * 1024
}

/// Requests `latest.jpg` `readers` times at once; panics unless every answer is a JPEG.
fn concurrent_pictures(address: SocketAddr, readers: usize) {
    let threads: Vec<_> = (0..readers)
        .map(|_| std::thread::spawn(move || request(address, "GET", "/api/cameras/front/latest.jpg", &[], b"")))
        .collect();
    for thread in threads {
        let answer = thread.join().expect("reader thread");
        assert_eq!(answer.status, 200, "{}", answer.text());
        assert!(answer.body.starts_with(&[0xff, 0xd8]), "a JPEG");
    }
}

/// Asks for `latest.jpg` and reads whatever comes until the server closes: the daemon may stop
/// meanwhile.
fn ask_for_picture(address: SocketAddr) {
    let Ok(mut stream) = TcpStream::connect(address) else { return };
    let head = format!("GET /api/cameras/front/latest.jpg HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    if stream.write_all(head.as_bytes()).is_ok() {
        let _ = stream.read_to_end(&mut Vec::new());
    }
}

fn frames_processed(address: SocketAddr) -> u64 {
    let status = request(address, "GET", "/api/status", &[], b"").json();
    status["telemetry"]["cameras"]["front"]["frames"].as_u64().unwrap_or(0)
}

/// 40 readers of a 12 MP camera's picture took the daemon from 195 MB to 1.66 GB, detection from
/// 2 fps to 0-0.5, and SIGTERM 19-25 s: each request rendered a JPEG of its own. Here with a
/// 3.7 MP camera (the test suite's debug build draws and preprocesses slowly). Now a frame is
/// rendered once for all its readers and at most two renders run: the peak memory of rounds of 40
/// readers stays within a few frames of what one reader at a time took, the camera processes
/// frames while the rounds go on, `HEAD` renders nothing, and SIGTERM in the middle of a round
/// ends the daemon cleanly.
#[test]
fn concurrent_readers_of_a_large_frame_share_one_render_and_leave_detection_and_shutdown_alone() {
    const WIDTH: u64 = 2560;
    const HEIGHT: u64 = 1440;
    const READERS: usize = 40;
    const ROUNDS: usize = 3;
    let frame_bytes = WIDTH * HEIGHT * 3;
    let dir = shared_dir();
    let config = web_config(1, "hostile-pictures", dir.path())
        .camera("front", 2.0, &format!("{{ kind = \"synthetic\", width = {WIDTH}, height = {HEIGHT} }}"))
        .write(&dir.path().join("config.toml"));
    let mut daemon = RunningDaemon::start(&config, &[("RUST_LOG", OsStr::new("info"))]);
    let address = http_address(&mut daemon);
    let pid = daemon.pid();

    // A frame is kept once a reader asked for one: until then the picture is 503.
    daemon.wait_until("the first picture", || {
        request(address, "GET", "/api/cameras/front/latest.jpg", &[], b"").status == 200
    });
    // One reader at a time: what one render costs, in memory and time.
    let mut one_reader = Duration::ZERO;
    for _ in 0..3 {
        let started = Instant::now();
        concurrent_pictures(address, 1);
        one_reader = one_reader.max(started.elapsed());
    }
    let head = request(address, "HEAD", "/api/cameras/front/latest.jpg", &[], b"");
    assert_eq!((head.status, head.header("content-type")), (200, Some("image/jpeg")), "{head:?}");
    let peak_one = proc_status_bytes(pid, "VmHWM");

    // Rounds of readers go on until the camera has processed two frames meanwhile: a storm that
    // starved detection would never end before the wait's failure guard.
    let frames_start = frames_processed(address);
    let mut rounds = 0;
    daemon.wait_until("two frames processed during rounds of readers", || {
        concurrent_pictures(address, READERS);
        rounds += 1;
        rounds >= ROUNDS && frames_processed(address) >= frames_start + 2
    });
    let peak_storm = proc_status_bytes(pid, "VmHWM");
    println!(
        "{READERS} readers x {rounds} rounds of a {WIDTH}x{HEIGHT} picture: peak RSS {} MiB (one reader: {} MiB), \
         {} frames processed meanwhile, one reader {one_reader:?}",
        peak_storm >> 20,
        peak_one >> 20,
        frames_processed(address) - frames_start
    );
    assert!(
        peak_storm <= peak_one + 4 * frame_bytes,
        "peak RSS {} MiB with {READERS} readers against {} MiB with one: more than 4 frames ({} MiB) more",
        peak_storm >> 20,
        peak_one >> 20,
        (4 * frame_bytes) >> 20
    );

    // SIGTERM while a round is running: the daemon ends cleanly (a hung one fails the wait).
    let readers: Vec<_> = (0..READERS).map(|_| std::thread::spawn(move || ask_for_picture(address))).collect();
    std::thread::sleep(one_reader / 2);
    let stopping = Instant::now();
    daemon.signal(libc::SIGTERM);
    let status = daemon.wait_exit();
    println!("SIGTERM during {READERS} readers: {:?}", stopping.elapsed());
    for reader in readers {
        let _ = reader.join();
    }
    assert!(status.success(), "{status}:\n{}", daemon.log());
}
