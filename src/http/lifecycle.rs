//! The server's life: its port bound before anything is announced, served on the daemon's tokio
//! runtime, stopped within a bound.
//!
//! Owns: [`bind`], [`BoundListener`], [`HttpServer`] and [`STOP_GRACE`]. Must not: route or answer
//! requests ([`super::server`] and the handlers do).

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use super::connections;
use super::error::HttpError;
use super::hosts::AllowedHosts;
use super::metrics::Metrics;
use super::picture::Pictures;
use super::server;
use super::state::{HttpState, Video, ZonesChange};
use super::token::Token;
use crate::config::Config;
use crate::controls::Controls;
use crate::publish::live::LiveView;

/// Longest wait at shutdown for running requests (a picture waits at most a second for its frame).
pub const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// A running server; it stops when the daemon's runtime shuts down or on [`HttpServer::stop`].
#[derive(Debug)]
pub struct HttpServer {
    pub address: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
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
    /// `video`: the recorder whose clips the API lists and serves, and the cameras' live feeds.
    /// Must run inside the daemon's tokio runtime.
    pub fn start(
        listener: BoundListener,
        config: &Config,
        token: Option<Token>,
        view: Arc<LiveView>,
        changes: mpsc::Sender<ZonesChange>,
        controls: Arc<Controls>,
        video: Video,
    ) -> Result<HttpServer, HttpError> {
        let BoundListener(listener) = listener;
        let address = listener.local_addr().map_err(|source| HttpError::Listen {
            address: config.http.listen_addr().unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0))),
            source,
        })?;
        let cameras = view.cameras.len();
        let state = HttpState {
            metrics: Arc::new(Metrics::new(view.clone())),
            view,
            token,
            changes,
            saving: Arc::default(),
            hosts: Arc::new(AllowedHosts::new(address.ip(), &config.http.allowed_hosts)),
            pictures: Arc::new(Pictures::new(cameras)),
            controls,
            record: video.record,
            watch: video.watch,
            motion: video.motion,
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
