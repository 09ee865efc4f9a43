//! Who gets a place among the web server's capped connections when a new client arrives.
//!
//! A client that holds every connection with a cheap request now and then (a keep-alive
//! connection never times out while it asks something every few seconds) locked the page, the
//! API, `/healthz` and `/metrics` out, and reads need no token. So a new connection is accepted
//! while any place can be made for it, and a connection between requests (no request of it being
//! answered, after one was) gives its place up; a connection that has not asked anything yet
//! keeps its place until the header timeout, for its request may not have been read yet:
//!
//! - one client address (an IPv6 client's /64, which one machine can fill with addresses) keeps at
//!   most [`per_client_cap`] connections (a browser opens about six): a new one of a client at
//!   its share closes that client's least recently active idle connection (no byte moved for the
//!   longest); while none of them is idle (a burst of pictures through one reverse proxy), it may
//!   open more, up to three quarters of the cap, and gives them up as they become idle;
//! - so a quarter of the places (the reserve) is always left to other clients; when every place
//!   is taken, the least recently active idle connection is closed, whoever holds it, and when
//!   none is idle (or [`MAX_LEAVING`] are still closing), the new one waits in the listen queue
//!   (the accept loop does not accept it before a place frees).
//!
//! Owns: that choice ([`Admission`], and which connections a client beyond its share gives up:
//! [`Admission::surplus`]), what identifies a client ([`ClientKey`]) and how a
//! connection's activity is measured ([`Activity`]: requests being answered, through
//! [`Counted`], and the time of the last byte moved, through [`Watched`]). Must not: accept, serve
//! or close anything itself (the accept loop in `super::connections` does, gracefully: a response
//! being written is finished first), or look at requests.

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;

/// Most connections one client keeps, when the cap leaves room for it.
pub const MAX_CONNECTIONS_PER_CLIENT: usize = 16;

/// Connections one client keeps under a server cap of `cap`: at most
/// [`MAX_CONNECTIONS_PER_CLIENT`], and never more than [`shared_cap`].
pub fn per_client_cap(cap: usize) -> usize {
    MAX_CONNECTIONS_PER_CLIENT.min(shared_cap(cap))
}

/// The places one client may fill while all its connections are answering requests: three
/// quarters of the cap; the rest is the reserve for other clients.
pub fn shared_cap(cap: usize) -> usize {
    (cap - cap / 4).max(1)
}

/// What one client is, for the per-client cap: its IPv4 address, or its IPv6 address's /64.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClientKey(IpAddr);

impl ClientKey {
    pub fn of(peer: SocketAddr) -> ClientKey {
        match peer.ip() {
            IpAddr::V4(v4) => ClientKey(IpAddr::V4(v4)),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => ClientKey(IpAddr::V4(v4)),
                None => {
                    let prefix = u128::from(v6) & !((1u128 << 64) - 1);
                    ClientKey(IpAddr::V6(prefix.into()))
                }
            },
        }
    }
}

/// A connection's activity: the requests of it being answered, and when it last moved a byte (in
/// milliseconds since the server's start).
#[derive(Debug)]
pub struct Activity {
    epoch: Instant,
    last_ms: AtomicU64,
    answering: AtomicU32,
    /// A request of it was ever called: until then its first request may still be on its way (a
    /// connection not read yet), and it keeps its place until the header timeout.
    asked: AtomicBool,
    /// Told whenever a request of any connection has been answered: a place may have freed.
    answered: Arc<Notify>,
}

impl Activity {
    /// Active now, answering nothing yet.
    pub fn new(epoch: Instant, answered: Arc<Notify>) -> Arc<Activity> {
        let activity = Arc::new(Activity {
            epoch,
            last_ms: AtomicU64::new(0),
            answering: AtomicU32::new(0),
            asked: AtomicBool::new(false),
            answered,
        });
        activity.touch();
        activity
    }

    fn touch(&self) {
        let ms = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    fn last_ms(&self) -> u64 {
        self.last_ms.load(Ordering::Relaxed)
    }

    /// Idle: it has asked something, and nothing of it is being answered now. An idle connection
    /// may give its place up.
    fn is_idle(&self) -> bool {
        self.asked.load(Ordering::Relaxed) && self.answering.load(Ordering::Relaxed) == 0
    }
}

/// A request being answered, from its call to its response (a streamed body goes on after: its
/// bytes keep the connection active).
struct Answering(Arc<Activity>);

impl Answering {
    fn start(activity: &Arc<Activity>) -> Answering {
        activity.asked.store(true, Ordering::Relaxed);
        activity.answering.fetch_add(1, Ordering::Relaxed);
        Answering(activity.clone())
    }
}

impl Drop for Answering {
    fn drop(&mut self) {
        self.0.answering.fetch_sub(1, Ordering::Relaxed);
        self.0.answered.notify_one();
    }
}

/// Connections told to give their place up that may still be open (finishing a response for at
/// most `super::connections::LEAVE_GRACE`): beyond them, new connections wait in the listen queue,
/// so the descriptors stay within the cap and this.
pub const MAX_LEAVING: usize = 4;

/// What to do with a new connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision<K> {
    Admit,
    /// Admit it, and tell this connection to give its place up.
    AdmitInPlaceOf(K),
    /// Close it: its client fills its share and the shared places, none of them idle.
    Refuse,
}

/// One open connection.
#[derive(Debug)]
struct Entry {
    client: ClientKey,
    activity: Arc<Activity>,
    /// Told to give its place up: no longer the client's, still open until its task ends.
    leaving: bool,
}

/// The open connections, by the key the accept loop closes them with (`K`: its task's id).
#[derive(Debug)]
pub struct Admission<K> {
    cap: usize,
    per_client: usize,
    shared: usize,
    open: HashMap<K, Entry>,
}

impl<K: Copy + Eq + Hash> Admission<K> {
    /// At most `cap` connections ([`per_client_cap`], [`shared_cap`]), and [`MAX_LEAVING`] more
    /// that are closing.
    pub fn new(cap: usize) -> Admission<K> {
        let cap = cap.max(1);
        Admission { cap, per_client: per_client_cap(cap), shared: shared_cap(cap), open: HashMap::new() }
    }

    /// Connections open now, those closing included.
    pub fn len(&self) -> usize {
        self.open.len()
    }

    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    fn leaving_count(&self) -> usize {
        self.open.values().filter(|entry| entry.leaving).count()
    }

    /// Whether a new connection must wait in the listen queue (not be accepted yet): every place is
    /// taken and none can be given up (no connection is idle, or [`MAX_LEAVING`] are closing).
    pub fn must_wait(&self) -> bool {
        self.open.len() >= self.cap && (self.leaving_count() >= MAX_LEAVING || self.idlest(None).is_none())
    }

    /// The least recently active idle connection, of `client` or of anyone, not closing already.
    fn idlest(&self, client: Option<ClientKey>) -> Option<K> {
        self.open
            .iter()
            .filter(|(_, entry)| {
                !entry.leaving && entry.activity.is_idle() && client.is_none_or(|client| entry.client == client)
            })
            .min_by_key(|(_, entry)| entry.activity.last_ms())
            .map(|(id, _)| *id)
    }

    /// Connections of `client` that are not closing.
    fn held_by(&self, client: ClientKey) -> usize {
        self.open.values().filter(|entry| !entry.leaving && entry.client == client).count()
    }

    /// Where a new connection of `client` goes (the module doc says why).
    pub fn place_for(&self, client: ClientKey) -> Decision<K> {
        let can_close = self.leaving_count() < MAX_LEAVING;
        let held = self.held_by(client);
        if held >= self.per_client {
            if let Some(id) = self.idlest(Some(client)).filter(|_| can_close) {
                return Decision::AdmitInPlaceOf(id);
            }
            if held >= self.shared {
                return Decision::Refuse;
            }
        }
        if self.open.len() < self.cap {
            return Decision::Admit;
        }
        match self.idlest(None).filter(|_| can_close) {
            Some(id) => Decision::AdmitInPlaceOf(id),
            None => Decision::Refuse,
        }
    }

    /// Idle connections of clients that keep more than their share (connections they opened while
    /// none of theirs was idle), least recently active first: to give their places up, down to the
    /// share.
    pub fn surplus(&self) -> Vec<K> {
        let mut held: HashMap<ClientKey, usize> = HashMap::new();
        for entry in self.open.values().filter(|entry| !entry.leaving) {
            *held.entry(entry.client).or_default() += 1;
        }
        let mut idle: Vec<(K, ClientKey, u64)> = self
            .open
            .iter()
            .filter(|(_, entry)| !entry.leaving && entry.activity.is_idle() && held[&entry.client] > self.per_client)
            .map(|(id, entry)| (*id, entry.client, entry.activity.last_ms()))
            .collect();
        idle.sort_by_key(|(_, _, last_ms)| *last_ms);
        let mut surplus = Vec::new();
        for (id, client, _) in idle {
            if let Some(count) = held.get_mut(&client).filter(|count| **count > self.per_client) {
                *count -= 1;
                surplus.push(id);
            }
        }
        surplus
    }

    pub fn opened(&mut self, id: K, client: ClientKey, activity: Arc<Activity>) {
        self.open.insert(id, Entry { client, activity, leaving: false });
    }

    /// Connection `id` was told to give its place up.
    pub fn told_to_leave(&mut self, id: K) {
        if let Some(entry) = self.open.get_mut(&id) {
            entry.leaving = true;
        }
    }

    /// Connection `id` closed.
    pub fn closed(&mut self, id: K) {
        self.open.remove(&id);
    }
}

/// A connection's service that counts its requests being answered in its [`Activity`].
#[derive(Clone)]
pub struct Counted<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S> Counted<S> {
    pub fn new(inner: S, activity: Arc<Activity>) -> Counted<S> {
        Counted { inner, activity }
    }
}

impl<S, R> hyper::service::Service<R> for Counted<S>
where
    S: hyper::service::Service<R>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn call(&self, request: R) -> Self::Future {
        let answering = Answering::start(&self.activity);
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await;
            drop(answering);
            response
        })
    }
}

/// A connection's stream that notes in its [`Activity`] the time of every byte read or written.
pub struct Watched<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S> Watched<S> {
    pub fn new(inner: S, activity: Arc<Activity>) -> Watched<S> {
        Watched { inner, activity }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.touch();
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, data);
        if matches!(polled, Poll::Ready(Ok(written)) if written > 0) {
            self.activity.touch();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, data);
        if matches!(polled, Poll::Ready(Ok(written)) if written > 0) {
            self.activity.touch();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn client(address: &str) -> ClientKey {
        ClientKey::of(SocketAddr::new(address.parse().expect("address"), 40000))
    }

    /// A connection last active `ms` milliseconds after the epoch, answering `requests`.
    fn at(epoch: Instant, ms: u64, requests: u32) -> Arc<Activity> {
        Arc::new(Activity {
            epoch,
            last_ms: AtomicU64::new(ms),
            answering: AtomicU32::new(requests),
            asked: AtomicBool::new(true),
            answered: Arc::new(Notify::new()),
        })
    }

    #[test]
    fn one_client_keeps_at_most_its_share_and_a_quarter_is_left_to_the_others() {
        assert_eq!((per_client_cap(64), shared_cap(64)), (MAX_CONNECTIONS_PER_CLIENT, 48));
        assert_eq!((per_client_cap(16), shared_cap(16)), (12, 12));
        assert_eq!((per_client_cap(4), shared_cap(4)), (3, 3));
        assert_eq!((per_client_cap(1), shared_cap(1)), (1, 1));
    }

    #[test]
    fn an_ipv6_client_is_its_64_and_a_mapped_ipv4_client_its_ipv4_address() {
        assert_eq!(client("2001:db8:1:2::1"), client("2001:db8:1:2:ffff::9"));
        assert_ne!(client("2001:db8:1:2::1"), client("2001:db8:1:3::1"));
        assert_eq!(client("::ffff:192.0.2.7"), client("192.0.2.7"));
        assert_ne!(client("192.0.2.7"), client("192.0.2.8"));
    }

    #[test]
    fn a_client_at_its_share_gives_up_its_own_least_active_idle_connection() {
        let epoch = Instant::now();
        let mut admission = Admission::new(64);
        let (greedy, other) = (client("192.0.2.1"), client("192.0.2.2"));
        for id in 0..MAX_CONNECTIONS_PER_CLIENT as u64 {
            assert_eq!(admission.place_for(greedy), Decision::Admit);
            // The oldest is answering a request: it is not the one to go.
            admission.opened(id, greedy, at(epoch, 1000 + id, u32::from(id == 0)));
        }
        admission.opened(100, other, at(epoch, 0, 0));
        assert_eq!(admission.place_for(greedy), Decision::AdmitInPlaceOf(1), "its own least active idle one");
        assert_eq!(admission.place_for(other), Decision::Admit, "the others have room");
    }

    #[test]
    fn a_client_whose_connections_all_answer_requests_may_fill_the_shared_places_but_not_the_reserve() {
        let epoch = Instant::now();
        let mut admission = Admission::new(64);
        let burst = client("127.0.0.1");
        for id in 0..48 {
            assert_eq!(admission.place_for(burst), Decision::Admit, "connection {id}");
            admission.opened(id, burst, at(epoch, id, 1));
        }
        assert_eq!(admission.place_for(burst), Decision::Refuse, "the reserve is the others'");
        assert_eq!(admission.place_for(client("192.0.2.9")), Decision::Admit);
    }

    #[test]
    fn when_every_place_is_taken_the_least_active_idle_connection_goes_whoever_holds_it() {
        let epoch = Instant::now();
        let mut admission = Admission::new(4);
        for (id, address, ms, requests) in
            [(1, "192.0.2.1", 50, 0), (2, "192.0.2.2", 10, 1), (3, "192.0.2.3", 70, 0), (4, "192.0.2.4", 30, 0)]
        {
            assert_eq!(admission.place_for(client(address)), Decision::Admit);
            admission.opened(id, client(address), at(epoch, ms, requests));
        }
        assert!(!admission.must_wait());
        assert_eq!(admission.place_for(client("192.0.2.9")), Decision::AdmitInPlaceOf(4), "2 is answering");
        admission.closed(4);
        assert_eq!(admission.len(), 3);
        assert_eq!(admission.place_for(client("192.0.2.9")), Decision::Admit);
        admission.opened(5, client("192.0.2.9"), at(epoch, 90, 1));
        for entry in admission.open.values() {
            entry.activity.answering.store(1, Ordering::Relaxed);
        }
        assert!(admission.must_wait(), "nothing to give up: the next waits in the listen queue");
    }

    #[test]
    fn a_client_over_its_share_gives_up_its_idle_connections_down_to_the_share() {
        let epoch = Instant::now();
        let mut admission = Admission::new(64);
        let burst = client("127.0.0.1");
        for id in 0..20u64 {
            // 0..=4 still answering; the others idle, 19 the least recently active.
            admission.opened(id, burst, at(epoch, 1000 - id, u32::from(id < 5)));
        }
        admission.opened(100, client("192.0.2.9"), at(epoch, 0, 0));
        assert_eq!(admission.surplus(), [19, 18, 17, 16], "down to 16, the least recently active first");
        for id in [19, 18, 17, 16] {
            admission.told_to_leave(id);
        }
        assert!(admission.surplus().is_empty());
        assert_eq!(admission.len(), 21, "closing, still open");
    }

    #[test]
    fn while_four_connections_are_closing_no_place_is_made_and_new_ones_wait() {
        let epoch = Instant::now();
        let mut admission = Admission::new(8);
        for id in 0..8u64 {
            admission.opened(id, client(&format!("192.0.2.{id}")), at(epoch, id, 0));
        }
        for id in 0..MAX_LEAVING as u64 {
            let Decision::AdmitInPlaceOf(gone) = admission.place_for(client("192.0.2.100")) else {
                panic!("an idle one makes room");
            };
            assert_eq!(gone, id, "the least recently active");
            admission.told_to_leave(gone);
            admission.opened(100 + id, client("192.0.2.100"), at(epoch, 100 + id, 1));
        }
        assert!(admission.must_wait(), "{} open, {MAX_LEAVING} of them closing", admission.len());
        admission.closed(0);
        assert!(!admission.must_wait());
    }

    #[test]
    fn a_connection_that_has_not_asked_anything_yet_keeps_its_place() {
        let epoch = Instant::now();
        let mut admission = Admission::new(4);
        let fresh = Activity::new(epoch, Arc::new(Notify::new()));
        admission.opened(1, client("192.0.2.1"), fresh.clone());
        for id in 2..=4 {
            admission.opened(id, client("192.0.2.2"), at(epoch, 100, 1));
        }
        assert!(admission.must_wait());
        drop(Answering::start(&fresh));
        assert_eq!(admission.place_for(client("192.0.2.9")), Decision::AdmitInPlaceOf(1), "asked and answered");
    }

    #[tokio::test]
    async fn a_watched_stream_notes_the_time_of_the_bytes_it_moves() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let epoch = Instant::now() - Duration::from_secs(100);
        let activity = at(epoch, 0, 0);
        let (near, mut far) = tokio::io::duplex(64);
        let mut watched = Watched::new(near, activity.clone());
        far.write_all(b"GET").await.expect("write");
        let mut buf = [0u8; 3];
        watched.read_exact(&mut buf).await.expect("read");
        let after_read = activity.last_ms();
        assert!(after_read >= 100_000, "{after_read}");
        activity.last_ms.store(0, Ordering::Relaxed);
        watched.write_all(b"200").await.expect("write");
        assert!(activity.last_ms() >= 100_000);
    }
}
