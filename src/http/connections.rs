//! Accepting and serving connections, bounded: the web server must never take the descriptors the
//! cameras and the broker need, and no client may keep the others out.
//!
//! Owns: the accept loop, the cap on open connections ([`connection_cap`]: at most
//! [`MAX_CONNECTIONS`], fewer when the descriptor limit leaves less beyond what the daemon keeps in
//! reserve), closing the connection [`super::admission`] names to make room for a new one (an
//! idle one of a client beyond its share, else the least recently active idle one when every
//! place is taken; while every connection answers a request, new ones wait in the listen queue), the
//! timeout on request headers, which also closes a keep-alive connection idle for as long
//! ([`HEADER_TIMEOUT`]), the timeout on a response that the client stops reading
//! ([`WRITE_TIMEOUT`]), and the graceful end of every connection at stop. Must not: look at
//! requests (the router's guard does) or outlive the server's task (connections are owned by it
//! and dropped with it).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch, Notify};
use tokio::task::{Id, JoinSet};
use tokio_io_timeout::TimeoutStream;

use super::admission::{Activity, Admission, ClientKey, Counted, Decision, Watched};

/// Most connections served at once: a few browsers (about six connections each) and a scraper.
pub const MAX_CONNECTIONS: usize = 64;
/// A request's headers must arrive within this, counted from the connection's start or the end
/// of its previous response: a connection that sends nothing is closed after it.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// A response whose bytes the client stops taking (a full socket buffer that does not drain) for
/// this long closes the connection: a client that asks and never reads must not keep one of the
/// capped connections, nor hold up the daemon's stop. A slow link still drains now and then.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// A connection told to give its place up finishes the response it is writing within this, or is
/// closed anyway (a client that stopped reading is no reason to keep a place from a new one).
pub const LEAVE_GRACE: Duration = Duration::from_secs(2);
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
/// each connection finish its request, and returns when all have closed. A new connection is
/// accepted while a place can be made for it ([`Admission`]: another one may be closed first).
pub async fn serve(listener: TcpListener, router: Router, limits: ConnectionLimits, mut stop: oneshot::Receiver<()>) {
    let epoch = Instant::now();
    let answered = Arc::new(Notify::new());
    let mut admission: Admission<Id> = Admission::new(limits.cap);
    // Each connection's "give your place up": it finishes the response it is writing, if any.
    let mut leave: HashMap<Id, oneshot::Sender<()>> = HashMap::new();
    let mut connections = JoinSet::new();
    let (closing, closing_seen) = watch::channel(false);
    let mut last_accept_log: Option<Instant> = None;
    loop {
        // Every place answers a request: the next connection waits in the listen queue until one
        // is answered (its connection may then give its place up) or closes.
        let accepting = !admission.must_wait();
        let (stream, peer) = tokio::select! {
            accepted = listener.accept(), if accepting => match accepted {
                Ok(accepted) => accepted,
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
            Some(ended) = connections.join_next_with_id() => {
                let id = match ended {
                    Ok((id, ())) => id,
                    Err(error) => error.id(),
                };
                admission.closed(id);
                leave.remove(&id);
                continue;
            }
            () = answered.notified() => {
                // A client that opened more than its share while none was idle gives them up
                // as they become idle.
                for id in admission.surplus() {
                    give_up(&mut admission, &mut leave, id);
                }
                continue;
            }
            _ = &mut stop => break,
        };
        let client = ClientKey::of(peer);
        match admission.place_for(client) {
            Decision::Admit => {}
            Decision::AdmitInPlaceOf(id) => give_up(&mut admission, &mut leave, id),
            Decision::Refuse => continue,
        }
        let activity = Activity::new(epoch, answered.clone());
        let service = Counted::new(TowerToHyperService::new(router.clone()), activity.clone());
        let mut closing = closing_seen.clone();
        let (told_to_leave, mut leaving) = oneshot::channel();
        let mut stream = TimeoutStream::new(stream);
        stream.set_write_timeout(Some(limits.write_timeout));
        let stream = Watched::new(Box::pin(stream), activity.clone());
        let abort = connections.spawn(async move {
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                _ = closing.changed() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
                Ok(()) = &mut leaving => {
                    connection.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(LEAVE_GRACE, connection).await;
                }
            }
        });
        admission.opened(abort.id(), client, activity);
        leave.insert(abort.id(), told_to_leave);
    }
    drop(listener);
    let _ = closing.send(true);
    while connections.join_next().await.is_some() {}
}

/// Tells connection `id` to give its place up: it closes once the response it is writing, if any,
/// is written, within [`LEAVE_GRACE`].
fn give_up(admission: &mut Admission<Id>, leave: &mut HashMap<Id, oneshot::Sender<()>>, id: Id) {
    if let Some(told) = leave.remove(&id) {
        let _ = told.send(());
    }
    admission.told_to_leave(id);
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

    /// `GET <path>` on `stream`, kept alive, and the whole answer (headers and body) read.
    async fn get(stream: &mut tokio::net::TcpStream, path: &str) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        stream.write_all(format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").as_bytes()).await.expect("request");
        let mut answer = Vec::new();
        let mut byte = [0u8; 1];
        while !answer.ends_with(b"\r\n\r\n") {
            stream.read_exact(&mut byte).await.expect("the answer's head");
            answer.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&answer).to_ascii_lowercase();
        let length = head
            .lines()
            .find_map(|line| line.strip_prefix("content-length: ").and_then(|n| n.trim().parse::<usize>().ok()))
            .unwrap_or(0);
        let mut body = vec![0u8; length];
        stream.read_exact(&mut body).await.expect("the body");
        answer.extend_from_slice(&body);
        String::from_utf8_lossy(&answer).into_owned()
    }

    fn small_router() -> Router {
        Router::new().route("/small", axum::routing::get(|| std::future::ready("small")))
    }

    /// Issue 49: 64 keep-alive connections, each asking something now and then, locked the page,
    /// the API, /healthz and /metrics out (no answer in 30 s).
    #[tokio::test]
    async fn a_new_client_is_answered_while_another_holds_every_connection() {
        use tokio::net::TcpStream;
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        let (stop, stopped) = oneshot::channel();
        let server = tokio::spawn(serve(listener, small_router(), ConnectionLimits::with_cap(4), stopped));
        let mut held = Vec::new();
        for _ in 0..8 {
            let mut stream = TcpStream::connect(address).await.expect("connect");
            assert!(get(&mut stream, "/small").await.ends_with("small"));
            held.push(stream);
        }
        // The held connections are the least recently active: one of them makes room.
        let mut newcomer = TcpStream::connect(address).await.expect("connect");
        let answer = tokio::time::timeout(Duration::from_secs(30), get(&mut newcomer, "/small")).await;
        assert!(answer.is_ok_and(|answer| answer.starts_with("HTTP/1.1 200")), "no answer");
        drop(held);
        stop.send(()).expect("server running");
        server.await.expect("server stops");
    }

    #[tokio::test]
    async fn a_client_that_stops_reading_does_not_hold_up_the_stop() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        use tokio::net::TcpStream;

        // Far more than the two sockets' buffers hold: its write stalls once they are full.
        let big = axum::body::Bytes::from(vec![0u8; 64 << 20]);
        let router = Router::new().route("/big", axum::routing::get(move || std::future::ready(big.clone())));
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

        // A graceful stop waits for the response in progress: the write timeout ends it.
        stop.send(()).expect("server running");
        let stopped = tokio::time::timeout(Duration::from_secs(30), server).await;
        assert!(stopped.is_ok(), "the stop waited for a client that stopped reading");
        drop(stalled);
    }
}
