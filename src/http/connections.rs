//! Accepting and serving connections, bounded: the web server must never take the descriptors the
//! cameras and the broker need.
//!
//! Owns: the accept loop, the cap on open connections ([`connection_cap`]: at most
//! [`MAX_CONNECTIONS`], fewer when the descriptor limit leaves less beyond what the daemon keeps in
//! reserve), the timeout on request headers, which also closes a keep-alive connection idle for as
//! long ([`HEADER_TIMEOUT`]), the timeout on a response that the client stops reading
//! ([`WRITE_TIMEOUT`]), and the graceful end of every connection at stop. Beyond the cap,
//! connections wait in the kernel's listen queue (they cost the daemon no descriptor) until one
//! closes. Must not: look at requests (the router's guard does) or outlive the server's task
//! (connections are owned by it and dropped with it).

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch, Semaphore};
use tokio::task::JoinSet;
use tokio_io_timeout::TimeoutStream;

/// Most connections served at once: a few browsers (about six connections each) and a scraper.
pub const MAX_CONNECTIONS: usize = 64;
/// A request's headers must arrive within this, counted from the connection's start or the end
/// of its previous response: a connection that sends nothing is closed after it.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// A response whose bytes the client stops taking (a full socket buffer that does not drain) for
/// this long closes the connection: a client that asks and never reads must not keep one of the
/// capped connections, nor hold up the daemon's stop. A slow link still drains now and then.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// Descriptors kept for everything but the web server: the broker's socket, the journal, the
/// model and ONNX Runtime, epoll and event descriptors...
const RESERVED_DESCRIPTORS: u64 = 64;
/// ... and each camera's (a device node, an image file, an RTSP session's sockets and pipes).
const RESERVED_DESCRIPTORS_PER_CAMERA: u64 = 16;
/// Fewest connections served, however low the limit.
const MIN_CONNECTIONS: usize = 4;
/// Pause after an accept that failed for want of a resource (descriptors, memory).
const ACCEPT_RETRY: Duration = Duration::from_millis(250);
/// At most one log line per this for failing accepts.
const ACCEPT_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// Connections to serve at once with `open_files` descriptors (`None`: no limit) and `cameras`
/// cameras: [`MAX_CONNECTIONS`], or what the limit leaves beyond the reserve.
pub fn connection_cap(open_files: Option<u64>, cameras: usize) -> usize {
    let reserve = RESERVED_DESCRIPTORS.saturating_add(RESERVED_DESCRIPTORS_PER_CAMERA.saturating_mul(cameras as u64));
    let Some(limit) = open_files else { return MAX_CONNECTIONS };
    let left = usize::try_from(limit.saturating_sub(reserve)).unwrap_or(usize::MAX);
    left.clamp(MIN_CONNECTIONS, MAX_CONNECTIONS)
}

/// How many connections are served at once and how long each may keep the server waiting.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    pub cap: usize,
    pub header_timeout: Duration,
    pub write_timeout: Duration,
}

impl ConnectionLimits {
    /// The daemon's: at most `cap` connections, [`HEADER_TIMEOUT`] and [`WRITE_TIMEOUT`].
    pub fn with_cap(cap: usize) -> ConnectionLimits {
        ConnectionLimits { cap, header_timeout: HEADER_TIMEOUT, write_timeout: WRITE_TIMEOUT }
    }
}

/// Serves `router` on `listener` within `limits` until `stop` fires; then stops accepting, lets
/// each connection finish its request, and returns when all have closed.
pub async fn serve(listener: TcpListener, router: Router, limits: ConnectionLimits, mut stop: oneshot::Receiver<()>) {
    let permits = Arc::new(Semaphore::new(limits.cap));
    let mut connections = JoinSet::new();
    let (closing, closing_seen) = watch::channel(false);
    let mut last_accept_log: Option<Instant> = None;
    loop {
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            Some(_) = connections.join_next() => continue,
            _ = &mut stop => break,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    if last_accept_log.is_none_or(|at| at.elapsed() >= ACCEPT_LOG_INTERVAL) {
                        last_accept_log = Some(Instant::now());
                        log::warn!("http: cannot accept a connection: {e}");
                    }
                    if !is_per_connection_error(&e) {
                        tokio::time::sleep(ACCEPT_RETRY).await;
                    }
                    continue;
                }
            },
            Some(_) = connections.join_next() => continue,
            _ = &mut stop => break,
        };
        let service = TowerToHyperService::new(router.clone());
        let mut closing = closing_seen.clone();
        let mut stream = TimeoutStream::new(stream);
        stream.set_write_timeout(Some(limits.write_timeout));
        connections.spawn(async move {
            let _permit = permit;
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .serve_connection(TokioIo::new(Box::pin(stream)), service);
            tokio::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                _ = closing.changed() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
        });
    }
    drop(listener);
    let _ = closing.send(true);
    while connections.join_next().await.is_some() {}
}

/// An accept error that concerns only the connection being accepted (the peer reset it before it
/// was taken): accept the next at once.
fn is_per_connection_error(error: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(error.kind(), ConnectionRefused | ConnectionAborted | ConnectionReset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_leaves_the_reserve_to_the_cameras_and_the_broker() {
        assert_eq!(connection_cap(None, 4), MAX_CONNECTIONS);
        assert_eq!(connection_cap(Some(1024), 4), MAX_CONNECTIONS, "systemd's default soft limit");
        assert_eq!(connection_cap(Some(256), 1), MAX_CONNECTIONS);
        assert_eq!(connection_cap(Some(128), 2), 32, "128 - 64 - 2 x 16");
        assert_eq!(connection_cap(Some(64), 8), MIN_CONNECTIONS);
    }

    #[tokio::test]
    async fn a_client_that_stops_reading_gives_its_connection_back() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        use tokio::net::TcpStream;

        // Far more than the two sockets' buffers hold: its write stalls once they are full.
        let big = axum::body::Bytes::from(vec![0u8; 64 << 20]);
        let router = Router::new()
            .route("/big", axum::routing::get(move || std::future::ready(big.clone())))
            .route("/small", axum::routing::get(|| std::future::ready("small")));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        let limits =
            ConnectionLimits { cap: 1, write_timeout: Duration::from_millis(300), ..ConnectionLimits::with_cap(1) };
        let (stop, stopped) = oneshot::channel();
        let server = tokio::spawn(serve(listener, router, limits, stopped));

        let mut stalled = TcpStream::connect(address).await.expect("connect");
        stalled.write_all(b"GET /big HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").await.expect("request");
        let mut start = [0u8; 12];
        stalled.read_exact(&mut start).await.expect("the response starts");
        assert_eq!(&start, b"HTTP/1.1 200");

        // Waits in the listen queue while the only connection is taken.
        let mut next = TcpStream::connect(address).await.expect("connect");
        next.write_all(b"GET /small HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").await.expect("request");
        let mut answer = Vec::new();
        let served = tokio::time::timeout(Duration::from_secs(30), next.read_to_end(&mut answer)).await;
        assert!(served.is_ok(), "the only connection stayed with a client that stopped reading");
        assert!(answer.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&answer));
        assert!(answer.ends_with(b"small"));

        drop(stalled);
        stop.send(()).expect("server running");
        server.await.expect("server stops");
    }
}
