//! The HTTP stage: the built-in page, the JSON API and Prometheus `/metrics`, on the daemon's tokio
//! runtime (axum, HTTP/1).
//!
//! Owns: the listener (`[http] listen`) and its connections, bounded in number and time
//! ([`connections`]; which one makes room for a new client: [`admission`]), the names it answers to ([`hosts`]), the token (`[http] token_file`, read
//! once at start, never logged), the routes ([`server`]), the handlers ([`api`], and [`clips`] for
//! event clips), the live pictures ([`picture`]), the metrics ([`metrics`]) in both text formats ([`exposition`]) and
//! the page's assets compiled into the binary ([`page`]: no files to install, no CDN). It reads the
//! daemon only through the [`LiveView`], the [`Controls`] and the [`Recorder`]'s index, and changes
//! only the zones and the controls; a zone change is saved to the zones file and applied by the
//! daemon's loop, which it asks through a channel ([`ZonesChange`]) and whose answer it waits for,
//! so a saved zone is live when the request returns, and a change that comes once the loop has
//! stopped is saved nowhere; a control change is applied by the daemon's loop, which the controls wake. Must not:
//! touch a frame slot, hold a lock the pipeline waits on (it copies `Arc`s out of the view), or let
//! a request path reach the file system beyond the one zones file and the clips the recorder's
//! index lists.

pub mod admission;
pub mod api;
pub mod clips;
pub mod connections;
pub mod exposition;
pub mod hosts;
pub mod metrics;
pub mod page;
pub mod picture;
pub mod server;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use crate::config::zones_file::CameraScene;
use crate::config::Config;
use crate::controls::Controls;
use crate::publish::live::LiveView;
use crate::record::Recorder;
use crate::track::events::Scene;

/// Longest wait at shutdown for running requests (a picture waits at most a second for its frame).
pub const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Largest token file read (a token is one line).
const MAX_TOKEN_FILE_BYTES: u64 = 4096;

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("`http.token_file` {path}: {reason}")]
    Token { path: PathBuf, reason: String },
    #[error("`http.listen` {address}: cannot listen: {source}")]
    Listen { address: SocketAddr, source: std::io::Error },
}

/// A zone and line change for one camera, already parsed and checked; the daemon's loop saves it
/// to the zones file, applies it to the camera's tracking and answers (an error: not saved).
#[derive(Debug)]
pub struct ZonesChange {
    /// As the zones file keeps it (and the running config shows it).
    pub scene: CameraScene,
    /// As tracking uses it.
    pub tracked: Scene,
    pub applied: oneshot::Sender<Result<(), String>>,
}

/// The bearer token that writes must carry.
#[derive(Clone)]
pub struct Token(Arc<str>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<hidden>)")
    }
}

impl Token {
    /// The first line of `path`, trimmed; an empty one is refused.
    pub fn read(path: &Path) -> Result<Token, HttpError> {
        let error = |reason: String| HttpError::Token { path: path.to_path_buf(), reason };
        // Bounded, non-blocking, regular files only: a FIFO in its place must not hang the start.
        let text = crate::sys::files::read_to_string(path, MAX_TOKEN_FILE_BYTES).map_err(|e| error(e.to_string()))?;
        let token = text.lines().next().unwrap_or_default().trim();
        if token.is_empty() {
            return Err(error("the first line is empty".into()));
        }
        Ok(Token(token.into()))
    }

    #[cfg(test)]
    pub fn new(token: &str) -> Token {
        Token(token.into())
    }

    /// Whether `candidate` is the token; takes the same time wherever the first difference is.
    pub fn matches(&self, candidate: &str) -> bool {
        let (a, b) = (self.0.as_bytes(), candidate.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
}

/// What the handlers share.
#[derive(Debug, Clone)]
pub struct HttpState {
    pub view: Arc<LiveView>,
    pub token: Option<Token>,
    pub changes: mpsc::Sender<ZonesChange>,
    /// Serialises zone changes (read the running zones, merge, check, save, apply).
    pub saving: Arc<tokio::sync::Mutex<()>>,
    pub metrics: Arc<metrics::Metrics>,
    /// The `Host` values requests may carry (DNS rebinding).
    pub hosts: Arc<hosts::AllowedHosts>,
    /// Each camera's live picture, rendered once per frame.
    pub pictures: Arc<picture::Pictures>,
    /// The run-time controls that `PUT /api/controls` sets.
    pub controls: Arc<Controls>,
    /// The recorder, when a camera records clips.
    pub record: Option<Arc<Recorder>>,
}

/// A running server; it stops when the daemon's runtime shuts down or on [`HttpServer::stop`].
#[derive(Debug)]
pub struct HttpServer {
    pub address: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl HttpError {
    /// Whether a restart may find things otherwise: the port is taken by another process (the one
    /// before, still shutting down) or the address is not on the machine yet (DHCP at boot). Any
    /// other failure (a token file, a port only root may take) is the config's.
    pub fn is_transient(&self) -> bool {
        use std::io::ErrorKind::{AddrInUse, AddrNotAvailable};
        matches!(self, HttpError::Listen { source, .. } if matches!(source.kind(), AddrInUse | AddrNotAvailable))
    }
}

/// `[http] listen`, bound and not yet served: the daemon binds it before it announces anything, so
/// that a port it cannot have ends the start before the broker hears of it.
#[derive(Debug)]
pub struct BoundListener(tokio::net::TcpListener);

/// Binds `[http] listen`; `Ok(None)` when the server is off. Must run inside the daemon's tokio
/// runtime.
pub fn bind(config: &Config) -> Result<Option<BoundListener>, HttpError> {
    let Some(address) = config.http.listen_addr() else { return Ok(None) };
    let listener = std::net::TcpListener::bind(address)
        .and_then(|listener| listener.set_nonblocking(true).map(|()| listener))
        .and_then(tokio::net::TcpListener::from_std)
        .map_err(|source| HttpError::Listen { address, source })?;
    Ok(Some(BoundListener(listener)))
}

impl HttpServer {
    /// Serves on `listener` ([`bind`]). `token` is the one read from `[http] token_file` by the
    /// start-up checks (`crate::cmd::preflight::preflight`), so that `check-config` reads it too.
    /// `record`: the recorder whose clips the API lists and serves. Must run inside the daemon's
    /// tokio runtime.
    pub fn start(
        listener: BoundListener,
        config: &Config,
        token: Option<Token>,
        view: Arc<LiveView>,
        changes: mpsc::Sender<ZonesChange>,
        controls: Arc<Controls>,
        record: Option<Arc<Recorder>>,
    ) -> Result<HttpServer, HttpError> {
        let BoundListener(listener) = listener;
        let address = listener.local_addr().map_err(|source| HttpError::Listen {
            address: config.http.listen_addr().unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0))),
            source,
        })?;
        let cameras = view.cameras.len();
        let state = HttpState {
            metrics: Arc::new(metrics::Metrics::new(view.clone())),
            view,
            token,
            changes,
            saving: Arc::default(),
            hosts: Arc::new(hosts::AllowedHosts::new(address.ip(), &config.http.allowed_hosts)),
            pictures: Arc::new(picture::Pictures::new(cameras)),
            controls,
            record,
        };
        let (stop, stopped) = oneshot::channel::<()>();
        let router = server::router(state);
        let open_files = crate::sys::limits::open_files_limit();
        let cap = connections::connection_cap(open_files, config.cameras.len());
        if cap < connections::MAX_CONNECTIONS {
            log::warn!(
                "http: at most {cap} connections at once: the limit of {} open files leaves no more beyond what \
                 the cameras and the broker need (systemd: LimitNOFILE=)",
                open_files.unwrap_or_default()
            );
        }
        let task =
            tokio::spawn(connections::serve(listener, router, connections::ConnectionLimits::with_cap(cap), stopped));
        Ok(HttpServer { address, stop: Some(stop), task })
    }

    /// Stops accepting and lets running requests finish, for at most [`STOP_GRACE`]; then drops
    /// what is left (a browser's idle keep-alive connection must not hold up the daemon's stop).
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if tokio::time::timeout(STOP_GRACE, &mut self.task).await.is_err() {
            self.task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_matches_only_itself_and_never_prints() {
        let token = Token::new("s3cret");
        assert!(token.matches("s3cret"));
        assert!(!token.matches("s3cre"));
        assert!(!token.matches("s3creT"));
        assert!(!format!("{token:?}").contains("s3cret"));
    }

    #[test]
    fn a_token_file_gives_its_first_line_and_an_empty_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "  abc123  \nsecond line\n").unwrap();
        assert!(Token::read(&path).unwrap().matches("abc123"));
        std::fs::write(&path, "\n").unwrap();
        let error = Token::read(&path).unwrap_err().to_string();
        assert!(error.contains("http.token_file") && error.contains("empty"), "{error}");
    }
}
