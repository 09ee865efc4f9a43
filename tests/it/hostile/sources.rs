//! Cameras whose frames stop (issue 35): an image folder emptied or left with nothing usable, and
//! an RTSP server that answers OPTIONS and then stays silent. Each is a camera offline — the
//! daemon keeps running, `/api/status` and `/healthz` say so — never an exit, never `streaming`.

use std::net::SocketAddr;
use std::path::Path;

use super::{run_command, shared_dir, web_config};
use crate::daemon::{images_source, sample, RunningDaemon};
use crate::http::{http_address, request};

/// `front`'s state, last error and frames as `/api/status` reports them, and the `/healthz` answer.
struct Seen {
    state: String,
    last_error: String,
    frames: u64,
    health: (u16, String),
}

fn look(address: SocketAddr) -> Seen {
    let status = request(address, "GET", "/api/status", &[], b"").json();
    let camera = &status["telemetry"]["cameras"]["front"];
    let health = request(address, "GET", "/healthz", &[], b"");
    Seen {
        state: camera["state"].as_str().unwrap_or_default().to_owned(),
        last_error: camera["last_error"].as_str().unwrap_or_default().to_owned(),
        frames: camera["frames"].as_u64().unwrap_or(0),
        health: (health.status, health.text()),
    }
}

fn offline(seen: &Seen) -> bool {
    matches!(seen.state.as_str(), "connecting" | "reconnecting")
        && seen.health.0 == 503
        && seen.health.1.contains("camera front")
}

fn move_all(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).expect("list") {
        let entry = entry.expect("entry");
        std::fs::rename(entry.path(), to.join(entry.file_name())).expect("move");
    }
}

/// An image folder emptied for a moment exited 1, and a restart while it was still empty exited 78
/// (which systemd does not restart): the service stayed down after the files came back. Now the
/// camera goes offline and comes back with the files; a daemon started on the empty folder waits.
#[test]
fn an_emptied_image_folder_is_a_camera_offline_that_comes_back_with_its_files() {
    let dir = shared_dir();
    let (images, away) = (dir.path().join("images"), dir.path().join("away"));
    std::fs::create_dir(&images).expect("mkdir");
    std::fs::create_dir(&away).expect("mkdir");
    for name in ["dog.jpg", "person.jpg"] {
        std::fs::copy(sample(name), images.join(name)).expect("copy");
    }
    let config = web_config(1, "hostile-emptied", dir.path())
        .camera("front", 4.0, &images_source(&images, "loop"))
        .write(&dir.path().join("config.toml"));
    let mut daemon = RunningDaemon::start(&config, &[]);
    let address = http_address(&mut daemon);
    daemon.wait_until("frames", || look(address).frames > 0);

    move_all(&images, &away);
    daemon.wait_until("the camera offline", || offline(&look(address)));
    move_all(&away, &images);
    let frames = look(address).frames;
    daemon.wait_until("frames again", || {
        let seen = look(address);
        seen.state == "streaming" && seen.frames > frames && seen.health.0 == 200
    });
    daemon.signal(libc::SIGTERM);
    assert_eq!(daemon.wait_exit().code(), Some(0), "{}", daemon.log());

    // Started while the folder is empty: check-config accepts it, run waits for the files.
    move_all(&images, &away);
    let checked = run_command("an empty image folder", "check-config", &config);
    assert!(checked.status.success(), "{}", checked.stderr);
    let mut daemon = RunningDaemon::start(&config, &[]);
    let address = http_address(&mut daemon);
    daemon.wait_until("the camera offline from the start", || offline(&look(address)));
    move_all(&away, &images);
    daemon.wait_until("the first frames", || look(address).frames > 0);
}

/// A folder holding only an image over `[limits]` exited 1: it is a camera offline as well.
#[test]
fn a_folder_of_only_unusable_images_is_a_camera_offline() {
    let dir = shared_dir();
    let images = dir.path().join("images");
    std::fs::create_dir(&images).expect("mkdir");
    std::fs::copy(sample("dog.jpg"), images.join("dog.jpg")).expect("copy");
    std::fs::write(images.join("broken.png"), b"not a PNG").expect("write");
    let config = web_config(1, "hostile-unusable", dir.path())
        .set("limits", "max_width", "64")
        .camera("front", 4.0, &images_source(&images, "loop"))
        .write(&dir.path().join("config.toml"));
    let mut daemon = RunningDaemon::start(&config, &[]);
    let address = http_address(&mut daemon);
    // `reconnecting` after a whole pass, not `connecting` (the state from the moment the camera
    // opens): the pass that found nothing usable is what used to end the daemon.
    daemon.wait_until("the camera offline after a pass with nothing usable", || {
        let seen = look(address);
        offline(&seen) && seen.state == "reconnecting" && seen.last_error.contains("none of the")
    });
    assert!(daemon.is_running(), "{}", daemon.log());
    assert_eq!(look(address).frames, 0);
}

/// An RTSP server that answers OPTIONS and then says nothing: reported as `streaming` with 0 frames
/// in about 97 % of tries, with `/healthz` ok. Now the camera is `connecting` (then reconnecting),
/// never streaming, and `/healthz` names it.
#[cfg(feature = "gstreamer")]
#[test]
fn an_rtsp_server_silent_after_options_is_a_camera_offline_never_streaming() {
    let server = silent::SilentRtspServer::start();
    let dir = shared_dir();
    let config = web_config(1, "hostile-silent-rtsp", dir.path())
        .camera("front", 0.0, &format!("{{ kind = \"rtsp\", url = \"rtsp://{}/stream\" }}", server.address()))
        .write(&dir.path().join("config.toml"));
    let mut daemon = RunningDaemon::start(&config, &[]);
    let address = http_address(&mut daemon);
    let mut states = Vec::new();
    daemon.wait_until("the camera offline, and OPTIONS answered", || {
        let seen = look(address);
        states.push(seen.state.clone());
        assert_ne!(seen.state, "streaming", "a camera that sent no frame is streaming: {states:?}");
        offline(&seen) && server.options_answered() > 0
    });
    assert_eq!(look(address).frames, 0);
}

/// An RTSP "server" that answers OPTIONS and then reads and never answers.
#[cfg(feature = "gstreamer")]
mod silent {
    use std::io::{BufRead, BufReader, Write};
    use std::net::{SocketAddr, TcpListener, TcpStream};
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    pub struct SilentRtspServer {
        address: SocketAddr,
        answered: Arc<AtomicUsize>,
        stop: Arc<AtomicBool>,
    }

    impl SilentRtspServer {
        pub fn start() -> SilentRtspServer {
            let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
            listener.set_nonblocking(true).expect("non-blocking");
            let address = listener.local_addr().expect("address");
            let (answered, stop) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicBool::new(false)));
            let (counter, stopping) = (answered.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut sessions = Vec::new();
                while !stopping.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            let (counter, stopping) = (counter.clone(), stopping.clone());
                            sessions.push(std::thread::spawn(move || session(stream, &counter, &stopping)));
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(20)),
                    }
                }
                sessions.into_iter().for_each(|session| drop(session.join()));
            });
            SilentRtspServer { address, answered, stop }
        }

        pub fn address(&self) -> SocketAddr {
            self.address
        }

        pub fn options_answered(&self) -> usize {
            self.answered.load(Ordering::Relaxed)
        }
    }

    impl Drop for SilentRtspServer {
        fn drop(&mut self) {
            self.stop.store(true, Ordering::Relaxed);
        }
    }

    /// Answers each OPTIONS request; any other request is read and left unanswered.
    fn session(stream: TcpStream, answered: &AtomicUsize, stop: &AtomicBool) {
        let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
        let mut writer = stream.try_clone().expect("clone");
        let mut reader = BufReader::new(stream);
        let (mut request, mut cseq) = (String::new(), String::new());
        while !stop.load(Ordering::Relaxed) {
            let mut line = String::new();
            match reader.read_line(&mut line) {
                Ok(0) => return,
                Ok(_) => {}
                Err(_) => continue,
            }
            if request.is_empty() {
                request = line.clone();
            } else if let Some(value) = line.to_ascii_lowercase().strip_prefix("cseq:") {
                cseq = value.trim().to_owned();
            } else if line == "\r\n" {
                if request.starts_with("OPTIONS") {
                    let answer = format!(
                        "RTSP/1.0 200 OK\r\nCSeq: {cseq}\r\nPublic: OPTIONS, DESCRIBE, SETUP, PLAY, TEARDOWN\r\n\r\n"
                    );
                    if writer.write_all(answer.as_bytes()).is_ok() {
                        answered.fetch_add(1, Ordering::Relaxed);
                    }
                }
                request.clear();
            }
        }
    }
}
