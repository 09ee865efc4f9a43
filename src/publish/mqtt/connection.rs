//! The connection task: the one owner of the rumqttc event loop.
//!
//! Owns: connecting and reconnecting with backoff (longer when another client takes the session
//! over; cut short when a broker that was away accepts connections again: [`BrokerProbe`]), the
//! retained state and the status after every CONNACK (`Outbox::resync`), the subscriptions after
//! every CONNACK and handing what arrives on them to the [`Inbound`] queue (through
//! [`Delivery`], which refuses what is too large), handing the outbox's messages to rumqttc within
//! the in-flight window, matching acknowledgements, and the bounded flush and clean disconnect at
//! shutdown. Must not: build payloads, or be called by anyone but the
//! [`Publisher`](super::publisher::Publisher) handle, which spawns it and talks to it only through the
//! outbox and its wake-up.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use rumqttc::{
    AsyncClient, ConnectionError, Event, EventLoop, LastWill, MqttOptions, Outgoing, Packet, QoS, SubscribeFilter,
};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::inbound::{Delivery, Inbound};
use super::login;
use super::outbox::{Shared, MAX_IN_FLIGHT, STATUS_OFFLINE};
use super::settings::MqttSettings;
use crate::sys::lock::lock;

/// Connects in the background on `runtime` and serves `shared`'s outbox until shutdown.
pub(super) fn spawn(
    runtime: &tokio::runtime::Handle,
    settings: MqttSettings,
    shared: Arc<Shared>,
    inbound: Option<Inbound>,
) -> JoinHandle<()> {
    // Room for the in-flight window, a SUBSCRIBE and a DISCONNECT.
    let (client, eventloop) = AsyncClient::new(mqtt_options(&settings), usize::from(MAX_IN_FLIGHT) + 2);
    let connection = Connection { client, shared, settings, inbound: inbound.map(Delivery::new) };
    runtime.spawn(connection.run(eventloop))
}

/// The client's options ([`login::client_options`]) with the Last Will.
fn mqtt_options(settings: &MqttSettings) -> MqttOptions {
    let mut options = login::client_options(settings, &settings.client_id);
    options.set_last_will(LastWill::new(settings.status_topic(), STATUS_OFFLINE, QoS::AtLeastOnce, true));
    options
}

/// The connection task's state, apart from the event loop that its `run` drives.
struct Connection {
    client: AsyncClient,
    shared: Arc<Shared>,
    settings: MqttSettings,
    inbound: Option<Delivery>,
}

/// A session that lasts less than this after its CONNACK counts as closed right away.
const SHORT_SESSION: Duration = Duration::from_secs(2);
/// Short sessions in a row that mean another client takes the session over.
const TAKEOVER_STREAK: u32 = 3;

/// Tells a session taken over by another client with the same client id (two daemons from one
/// cloned SD card) from an ordinary outage: the broker accepts the connection and closes it right
/// away, again and again, each client throwing the other out, while it stays up and answers.
/// Reconnecting at once would make the two flap the retained status every half second; the
/// connection task backs off instead. A broker that restarts (every 2 s, say) also ends sessions
/// soon after their CONNACK, but between two sessions it is away: a refused connection in between
/// ([`TakeoverWatch::broker_away`]) ends the streak.
#[derive(Debug, Default)]
struct TakeoverWatch {
    connected_at: Option<Instant>,
    short_in_a_row: u32,
}

impl TakeoverWatch {
    fn connected(&mut self, now: Instant) {
        self.connected_at = Some(now);
    }

    /// The connection ended at `now` while the broker still answers: whether the streak of
    /// sessions closed right after their CONNACK says the session is being taken over.
    fn lost(&mut self, now: Instant) -> bool {
        match self.connected_at.take() {
            Some(at) if now.saturating_duration_since(at) < SHORT_SESSION => self.short_in_a_row += 1,
            Some(_) => self.short_in_a_row = 0,
            None => {}
        }
        self.short_in_a_row >= TAKEOVER_STREAK
    }

    /// Nothing accepted a connection on the broker's port: whatever ended the last session, it
    /// was not another client.
    fn broker_away(&mut self) {
        self.connected_at = None;
        self.short_in_a_row = 0;
    }
}

/// Longest pause between two probes of a broker that is away (shorter when `reconnect_min_ms` is).
const MAX_PROBE_INTERVAL: Duration = Duration::from_millis(500);
/// Shortest pause between two probes, whatever `reconnect_min_ms` says.
const MIN_PROBE_INTERVAL: Duration = Duration::from_millis(100);

/// Whether the broker's port accepts TCP connections: a connect and an immediate close, nothing
/// sent (no MQTT session, no TLS handshake). While the broker is away (a restart, a crash, a
/// reboot of its machine) the connection task probes it this way every
/// [`BrokerProbe::interval`] instead of waiting out an exponential backoff that has grown to
/// seconds, so a broker that comes back is reconnected within about one interval. A broker that
/// answers and refuses us (credentials, TLS, a full server) is never probed: only the backoff paces
/// those attempts.
#[derive(Debug, Clone)]
struct BrokerProbe {
    host: String,
    port: u16,
    interval: Duration,
}

impl BrokerProbe {
    fn new(settings: &MqttSettings) -> BrokerProbe {
        BrokerProbe {
            host: settings.host.clone(),
            port: settings.port,
            interval: settings.reconnect_min.clamp(MIN_PROBE_INTERVAL, MAX_PROBE_INTERVAL),
        }
    }

    /// One probe, bounded by the interval (an unreachable machine does not answer at all).
    async fn accepts(&self) -> bool {
        let connect = tokio::net::TcpStream::connect((self.host.as_str(), self.port));
        matches!(tokio::time::timeout(self.interval, connect).await, Ok(Ok(_)))
    }

    /// Returns once the port accepts connections.
    async fn until_it_accepts(&self) {
        loop {
            tokio::time::sleep(self.interval).await;
            if self.accepts().await {
                return;
            }
        }
    }
}

/// Whether a failed connection attempt never reached a broker: nothing listens on the port, or no
/// route to it. Not a broker that answered and refused us, nor one that accepted the connection and
/// then did not answer (a timeout): probing those would only add attempts.
fn never_reached_a_broker(error: &ConnectionError) -> bool {
    use std::io::ErrorKind;
    match error {
        ConnectionError::Io(error) => matches!(
            error.kind(),
            ErrorKind::ConnectionRefused
                | ErrorKind::HostUnreachable
                | ErrorKind::NetworkUnreachable
                | ErrorKind::AddrNotAvailable
        ),
        _ => false,
    }
}

/// What the connection task does after handling something.
#[derive(PartialEq)]
enum Next {
    Continue,
    Stop,
}

impl Connection {
    async fn run(mut self, mut eventloop: EventLoop) {
        let broker = format!("{}:{}", self.settings.host, self.settings.port);
        let mut retry_delay = self.settings.reconnect_min;
        let mut ever_connected = false;
        // Set once shutdown has been requested: the end of the flush window.
        let mut flush_deadline: Option<Instant> = None;
        let mut disconnect_sent = false;
        let mut takeover = TakeoverWatch::default();
        let probe = BrokerProbe::new(&self.settings);
        loop {
            let polled = {
                // The poll future stays alive while new messages are handed over: cancelling it
                // part-way through a write is not something rumqttc promises to survive.
                let poll = eventloop.poll();
                tokio::pin!(poll);
                loop {
                    tokio::select! {
                        polled = &mut poll => break Some(polled),
                        () = self.shared.wake.notified() => {
                            hand_over(&self.client, &self.shared);
                            if self.shutdown_step(&mut flush_deadline, &mut disconnect_sent, ever_connected)
                                == Next::Stop
                            {
                                return;
                            }
                        }
                        () = sleep_until_deadline(flush_deadline) => break None,
                    }
                }
            };
            let Some(polled) = polled else {
                if !disconnect_sent {
                    self.flush_timed_out();
                }
                return;
            };
            match polled {
                Ok(event) => {
                    if matches!(event, Event::Incoming(Packet::ConnAck(_))) {
                        takeover.connected(Instant::now());
                    }
                    if self.handle_event(event, &broker, &mut ever_connected) == Next::Stop {
                        return;
                    }
                    retry_delay = self.settings.reconnect_min;
                }
                Err(error) => {
                    // rumqttc keeps events it buffered before the failure (acks read in the same
                    // batch, the write that failed) and hands them out after the next CONNACK,
                    // where they would be matched against re-sent messages; a stale collision would
                    // block the new connection. Both belong to the dead connection: what they
                    // acknowledged is re-sent (a duplicate at worst).
                    eventloop.state.events.clear();
                    eventloop.state.collision = None;
                    let was_connected = {
                        let mut outbox = lock(&self.shared.outbox);
                        let was_connected = outbox.connected;
                        outbox.on_connection_lost();
                        was_connected
                    };
                    if disconnect_sent {
                        return;
                    }
                    // Whether the broker went away (a restart, an outage) or is still there: a
                    // session lost while the broker keeps answering may be a takeover, and only a
                    // broker that is away is worth probing during the backoff.
                    let (broker_away, taken_over) = if was_connected {
                        let short_streak = takeover.lost(Instant::now());
                        let answers = probe.accepts().await;
                        (!answers, short_streak && answers)
                    } else {
                        (never_reached_a_broker(&error), false)
                    };
                    if broker_away {
                        takeover.broker_away();
                    }
                    let closing = lock(&self.shared.outbox).closing || self.shared.stopping.load(Ordering::Relaxed);
                    if taken_over {
                        retry_delay = self.settings.reconnect_max;
                        let streak = takeover.short_in_a_row;
                        lock(&self.shared.outbox).takeovers += 1;
                        log::error!(
                            "MQTT: {broker} closed the connection right after accepting it, {streak} times in a row: \
                             another client is probably using the client id {:?} (two devices from one cloned SD \
                             card?) and each throws the other out; give each daemon its own mqtt.client_id. \
                             Reconnecting in {retry_delay:?}",
                            self.settings.client_id
                        );
                    } else {
                        let when = if broker_away {
                            format!("as soon as it accepts connections, at the latest in {retry_delay:?}")
                        } else {
                            format!("in {retry_delay:?}")
                        };
                        let error = login::explain(&error, &self.settings);
                        if closing {
                            // Shutting down: the flush window bounds what is left, and its end says
                            // what was not delivered.
                            log::debug!("MQTT: {broker} during shutdown: {error}");
                        } else if was_connected {
                            log::info!("MQTT: connection to {broker} lost: {error}; reconnecting {when}");
                        } else {
                            log::warn!("MQTT: cannot connect to {broker}: {error}; retrying {when}");
                        }
                    }
                    if self.shutdown_step(&mut flush_deadline, &mut disconnect_sent, ever_connected) == Next::Stop {
                        return;
                    }
                    let retry_at = Instant::now() + retry_delay;
                    // Pinned across the loop: the frequent wake-ups (every publish) must not
                    // restart its interval.
                    let back = probe.until_it_accepts();
                    tokio::pin!(back);
                    loop {
                        tokio::select! {
                            () = tokio::time::sleep_until(retry_at) => break,
                            () = &mut back, if broker_away => break,
                            // A shutdown must not wait for the end of a long backoff.
                            () = self.shared.wake.notified() => {
                                if self.shutdown_step(&mut flush_deadline, &mut disconnect_sent, ever_connected)
                                    == Next::Stop
                                {
                                    return;
                                }
                            }
                            () = sleep_until_deadline(flush_deadline) => {
                                self.flush_timed_out();
                                return;
                            }
                        }
                    }
                    retry_delay = (retry_delay * 2).min(self.settings.reconnect_max);
                    continue;
                }
            }
            hand_over(&self.client, &self.shared);
            if self.shutdown_step(&mut flush_deadline, &mut disconnect_sent, ever_connected) == Next::Stop {
                return;
            }
        }
    }

    fn handle_event(&mut self, event: Event, broker: &str, ever_connected: &mut bool) -> Next {
        match event {
            Event::Incoming(Packet::ConnAck(_)) => {
                // A clean session: subscriptions are made again on every connection, before
                // anything is published on it.
                if let Some(inbound) = &self.inbound {
                    let filters = inbound.filters().iter().map(|f| SubscribeFilter::new(f.clone(), QoS::AtLeastOnce));
                    if let Err(error) = self.client.try_subscribe_many(filters) {
                        log::warn!("MQTT: cannot subscribe to {:?}: {error}", inbound.filters());
                    }
                }
                let mut outbox = lock(&self.shared.outbox);
                outbox.connected = true;
                if *ever_connected {
                    outbox.reconnects += 1;
                }
                // The broker may have lost every retained message: the state, then the status,
                // go first. During shutdown the queued `offline` stays the last word.
                outbox.resync();
                let queued = outbox.stats().queued;
                drop(outbox);
                *ever_connected = true;
                let messages = if queued == 1 { "message" } else { "messages" };
                log::info!("MQTT: connected to {broker} as {} ({queued} {messages} queued)", self.settings.client_id);
            }
            Event::Outgoing(Outgoing::Publish(pkid)) => lock(&self.shared.outbox).on_written(pkid),
            Event::Incoming(Packet::PubAck(ack)) => lock(&self.shared.outbox).on_acknowledged(ack.pkid),
            Event::Incoming(Packet::PubComp(comp)) => lock(&self.shared.outbox).on_acknowledged(comp.pkid),
            Event::Incoming(Packet::Publish(publish)) => {
                if let Some(inbound) = self.inbound.as_mut() {
                    inbound.deliver(&publish.topic, &publish.payload, publish.retain, std::time::Instant::now());
                }
            }
            Event::Outgoing(Outgoing::Disconnect) => {
                lock(&self.shared.outbox).connected = false;
                log::info!("MQTT: disconnected from {broker}");
                return Next::Stop;
            }
            _ => {}
        }
        Next::Continue
    }

    /// Once shutdown is requested: start the flush window, and when everything is acknowledged,
    /// disconnect (or stop at once when there is no connection to close). A daemon that never
    /// reached the broker stops at once: it has nobody to flush to, and no Last Will was ever
    /// registered.
    fn shutdown_step(
        &self,
        flush_deadline: &mut Option<Instant>,
        disconnect_sent: &mut bool,
        ever_connected: bool,
    ) -> Next {
        let outbox = lock(&self.shared.outbox);
        if !outbox.closing {
            return Next::Continue;
        }
        if !ever_connected {
            let queued = outbox.stats().queued;
            let messages = if queued == 1 { "message" } else { "messages" };
            log::info!(
                "MQTT: stopping without ever having reached {}:{}; {queued} {messages} not sent",
                self.settings.host,
                self.settings.port
            );
            return Next::Stop;
        }
        if flush_deadline.is_none() {
            *flush_deadline = Some(Instant::now() + self.settings.shutdown_flush);
        }
        if !outbox.is_flushed() || *disconnect_sent {
            return Next::Continue;
        }
        if !outbox.connected {
            return Next::Stop;
        }
        drop(outbox);
        if self.client.try_disconnect().is_err() {
            return Next::Stop;
        }
        *disconnect_sent = true;
        Next::Continue
    }

    fn flush_timed_out(&self) {
        let outbox = lock(&self.shared.outbox);
        let (queued, connected) = (outbox.stats().queued, outbox.connected);
        drop(outbox);
        let messages = if queued == 1 { "message" } else { "messages" };
        if connected {
            log::warn!(
                "MQTT: {queued} {messages} not acknowledged within {:?} of shutdown; closing the connection \
                 without DISCONNECT so the broker publishes the Last Will",
                self.settings.shutdown_flush
            );
        } else {
            log::warn!(
                "MQTT: the broker did not come back within {:?} of shutdown; {queued} {messages} not delivered \
                 (it published the Last Will, `offline`, when the connection was lost)",
                self.settings.shutdown_flush
            );
        }
    }
}

/// Hands waiting messages to rumqttc while connected and the in-flight window has room. The
/// request channel holds more than the window, so `try_publish` only fails if the event loop is gone.
fn hand_over(client: &AsyncClient, shared: &Shared) {
    loop {
        let Some(message) = lock(&shared.outbox).hand_over_next() else {
            return;
        };
        if let Err(error) = client.try_publish(message.topic, message.qos, message.retain, message.payload) {
            log::warn!("MQTT: could not hand a message to the client: {error}");
            lock(&shared.outbox).take_back_last();
            return;
        }
    }
}

async fn sleep_until_deadline(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_closed_right_after_connack_three_times_in_a_row_are_a_takeover() {
        let mut at = Instant::now();
        let mut watch = TakeoverWatch::default();
        let short_session = |watch: &mut TakeoverWatch, at: &mut Instant| {
            watch.connected(*at);
            *at += Duration::from_millis(300);
            let verdict = watch.lost(*at);
            *at += Duration::from_millis(500);
            verdict
        };
        assert!(!short_session(&mut watch, &mut at));
        assert!(!short_session(&mut watch, &mut at));
        assert!(short_session(&mut watch, &mut at), "the third in a row");
        assert!(short_session(&mut watch, &mut at), "and every one after it");
        watch.connected(at);
        assert!(!watch.lost(at + Duration::from_secs(60)), "a session that lasted ends the streak");
        assert!(!watch.lost(at + Duration::from_secs(61)), "a failed connect attempt is no session");
        at += Duration::from_secs(62);
        assert!(!short_session(&mut watch, &mut at));
    }

    #[test]
    fn short_sessions_of_a_broker_that_restarts_in_between_are_no_takeover() {
        let mut at = Instant::now();
        let mut watch = TakeoverWatch::default();
        for _ in 0..10 {
            watch.connected(at);
            at += Duration::from_millis(1500);
            assert!(!watch.lost(at));
            // The restarting broker refused the probe (or a connection attempt) before it came back.
            watch.broker_away();
            at += Duration::from_millis(500);
        }
        watch.connected(at);
        assert!(!watch.lost(at + Duration::from_millis(300)), "the streak starts over after the broker was away");
    }

    #[test]
    fn only_a_connection_that_found_nothing_listening_means_the_broker_is_away() {
        use std::io::{Error, ErrorKind};
        let io = |kind| ConnectionError::Io(Error::from(kind));
        assert!(never_reached_a_broker(&io(ErrorKind::ConnectionRefused)));
        assert!(never_reached_a_broker(&io(ErrorKind::HostUnreachable)));
        assert!(!never_reached_a_broker(&io(ErrorKind::ConnectionReset)), "a broker closed it: it is there");
        assert!(!never_reached_a_broker(&ConnectionError::ConnectionRefused(
            rumqttc::ConnectReturnCode::NotAuthorized
        )));
        assert!(!never_reached_a_broker(&ConnectionError::NetworkTimeout));
    }

    #[tokio::test]
    async fn the_probe_tells_a_listening_port_from_a_closed_one() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("address").port();
        let probe = BrokerProbe { host: "127.0.0.1".into(), port, interval: MIN_PROBE_INTERVAL };
        assert!(probe.accepts().await);
        drop(listener);
        assert!(!probe.accepts().await);
    }
}
