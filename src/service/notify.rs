//! systemd service notifications (`sd_notify`) and the pipeline liveness behind the watchdog.
//!
//! Owns: [`Notifier`] (READY/STATUS/STOPPING/WATCHDOG/EXTEND_TIMEOUT_USEC datagrams to
//! `$NOTIFY_SOCKET`, a no-op outside systemd), [`Liveness`] (every thread that must keep moving
//! registers a party and beats once per unit of progress), and [`WatchdogKeeper`], which sends
//! `WATCHDOG=1` only while every registered party makes progress, so that a hung daemon makes
//! systemd restart the service. Must not: decide *when* the daemon is ready or stopping (the daemon
//! does), touch frames, or block on anything but the one non-blocking datagram send.
//!
//! Two kinds of party, kept apart on purpose (the pipeline registers them):
//! - an *inference worker* beats after every frame it finishes and after every wait for a frame
//!   that ended without one: idle because no frames arrive is alive; a frame taken and not finished
//!   within the allowed silence is hung (the stall names the stage it is in);
//! - a camera's *source thread* beats on every turn of its loop — a frame, a skipped frame, a step
//!   of a reconnect backoff, a wait for the fps cap: a camera that is offline is alive and only its
//!   state says so (`source::SourceStatus`, shown in `STATUS=` and telemetry); a source stuck inside
//!   one call (a driver or GStreamer call that never returns) is hung.

use std::ffi::OsStr;
use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sd_notify::NotifyState;

use crate::frame::Stage;
use crate::sys::lock::lock;

#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    #[error("cannot connect to the systemd notify socket {socket}: {source}")]
    Connect { socket: String, source: io::Error },
    #[error("cannot send to the systemd notify socket: {0}")]
    Send(io::Error),
}

/// Sends state changes to the service manager. Cheap to share (`Arc<Notifier>`): every method
/// takes `&self` and sends one datagram.
#[derive(Debug)]
pub struct Notifier {
    socket: Option<UnixDatagram>,
    watchdog: Option<Duration>,
}

impl Notifier {
    /// From `$NOTIFY_SOCKET` (a path, or `@name` for an abstract socket) and
    /// `$WATCHDOG_USEC`/`$WATCHDOG_PID`. Without `NOTIFY_SOCKET` (not under systemd, or
    /// `Type=simple`) every call is a no-op.
    pub fn from_env() -> Result<Notifier, NotifyError> {
        match std::env::var_os("NOTIFY_SOCKET") {
            Some(socket) if !socket.is_empty() => Self::connect(&socket, sd_notify::watchdog_enabled()),
            _ => Ok(Self::disabled()),
        }
    }

    /// A notifier that sends nothing and has no watchdog.
    pub fn disabled() -> Notifier {
        Notifier { socket: None, watchdog: None }
    }

    /// Connects to `socket` (a filesystem path, or `@name` for the abstract namespace) with the
    /// given watchdog timeout. Tests use this instead of mutating the process environment.
    pub fn connect(socket: &OsStr, watchdog: Option<Duration>) -> Result<Notifier, NotifyError> {
        let connect_error = |source| NotifyError::Connect { socket: socket.to_string_lossy().into_owned(), source };
        let address = match socket.as_bytes().strip_prefix(b"@") {
            Some(name) => SocketAddr::from_abstract_name(name),
            None => SocketAddr::from_pathname(socket),
        }
        .map_err(connect_error)?;
        let datagram = UnixDatagram::unbound().map_err(connect_error)?;
        datagram.connect_addr(&address).map_err(connect_error)?;
        // A full socket buffer means systemd is not reading; dropping a keep-alive is better than
        // blocking the tokio task that sends it.
        datagram.set_nonblocking(true).map_err(connect_error)?;
        Ok(Notifier { socket: Some(datagram), watchdog })
    }

    /// True when notifications go somewhere.
    pub fn is_active(&self) -> bool {
        self.socket.is_some()
    }

    /// The watchdog timeout systemd expects keep-alives within (`WatchdogSec=`), if enabled.
    pub fn watchdog_interval(&self) -> Option<Duration> {
        self.watchdog
    }

    /// Sends several assignments in one datagram, e.g. `READY=1` with a `STATUS=`.
    pub fn send(&self, states: &[NotifyState<'_>]) -> Result<(), NotifyError> {
        let Some(socket) = &self.socket else {
            return Ok(());
        };
        let mut message = String::new();
        for state in states {
            // A newline inside STATUS= would start a new assignment: keep every value on one line.
            let line = state.to_string().replace('\n', " ");
            message.push_str(&line);
            message.push('\n');
        }
        socket.send(message.as_bytes()).map(|_| ()).map_err(NotifyError::Send)
    }

    /// `READY=1`: the model is loaded and the sources are open.
    pub fn ready(&self) -> Result<(), NotifyError> {
        self.send(&[NotifyState::Ready])
    }

    /// `STATUS=<line>`: the one-line summary `systemctl status` shows.
    pub fn status(&self, line: &str) -> Result<(), NotifyError> {
        self.send(&[NotifyState::Status(line)])
    }

    /// `STOPPING=1`: shutdown has begun.
    pub fn stopping(&self) -> Result<(), NotifyError> {
        self.send(&[NotifyState::Stopping])
    }

    /// `WATCHDOG=1`: one keep-alive.
    pub fn watchdog(&self) -> Result<(), NotifyError> {
        self.send(&[NotifyState::Watchdog])
    }

    /// `EXTEND_TIMEOUT_USEC=`: the start (or stop) timeout is extended to `by` from now. Send it
    /// again before `by` runs out; values beyond the protocol's u32 microseconds are clamped.
    pub fn extend_timeout(&self, by: Duration) -> Result<(), NotifyError> {
        self.send(&[NotifyState::ExtendTimeoutUsec(clamp_usec(by))])
    }

    /// `EXTEND_TIMEOUT_USEC=` and `STATUS=` together: a keep-alive during a long engine build.
    pub fn build_progress(&self, extend_by: Duration, status: &str) -> Result<(), NotifyError> {
        self.send(&[NotifyState::ExtendTimeoutUsec(clamp_usec(extend_by)), NotifyState::Status(status)])
    }
}

fn clamp_usec(duration: Duration) -> u32 {
    u32::try_from(duration.as_micros()).unwrap_or(u32::MAX)
}

/// No stage recorded yet, or between frames.
const NO_STAGE: u8 = u8::MAX;

#[derive(Debug)]
struct Party {
    name: String,
    /// Nanoseconds after [`Liveness::origin`] of the last beat.
    last_beat_ns: AtomicU64,
    /// Index into [`Stage::ALL`] of the stage being worked on, or [`NO_STAGE`].
    stage: AtomicU8,
    finished: AtomicBool,
    /// The handle was dropped without [`LivenessHandle::finish`]: its thread ended or panicked.
    abandoned: AtomicBool,
}

/// Why a party does not count as alive.
#[derive(Debug, Clone, PartialEq)]
pub struct Stall {
    /// The name given to [`Liveness::register`], e.g. `front` or `front/source`.
    pub name: String,
    /// Time since the last beat.
    pub silent_for: Duration,
    /// The stage it entered last and has not finished, if it reports stages.
    pub stage: Option<Stage>,
    /// Its handle was dropped without `finish()`.
    pub abandoned: bool,
}

impl std::fmt::Display for Stall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.abandoned {
            return write!(f, "{}: its thread ended without finishing", self.name);
        }
        write!(f, "{}: no progress for {:.1} s", self.name, self.silent_for.as_secs_f64())?;
        if let Some(stage) = self.stage {
            write!(f, " (in stage {})", stage.name())?;
        }
        Ok(())
    }
}

/// Progress registry shared by the pipelines and the watchdog task.
#[derive(Debug)]
pub struct Liveness {
    origin: Instant,
    parties: Mutex<Vec<Arc<Party>>>,
}

impl Default for Liveness {
    fn default() -> Self {
        Liveness { origin: Instant::now(), parties: Mutex::new(Vec::new()) }
    }
}

impl Liveness {
    pub fn new() -> Arc<Liveness> {
        Arc::new(Liveness::default())
    }

    /// Registers a party that has just made progress (registration counts as the first beat).
    pub fn register(self: &Arc<Self>, name: impl Into<String>) -> LivenessHandle {
        let party = Arc::new(Party {
            name: name.into(),
            last_beat_ns: AtomicU64::new(self.nanos_since_origin(Instant::now())),
            stage: AtomicU8::new(NO_STAGE),
            finished: AtomicBool::new(false),
            abandoned: AtomicBool::new(false),
        });
        self.lock().push(Arc::clone(&party));
        LivenessHandle { liveness: Arc::clone(self), party }
    }

    /// `Ok` when every party beat within `max_silence` or finished; else the stalled ones.
    pub fn all_alive(&self, max_silence: Duration) -> Result<(), Vec<Stall>> {
        self.all_alive_at(Instant::now(), max_silence)
    }

    /// [`Liveness::all_alive`] as seen at `now`.
    pub fn all_alive_at(&self, now: Instant, max_silence: Duration) -> Result<(), Vec<Stall>> {
        let now_ns = self.nanos_since_origin(now);
        let stalls: Vec<Stall> = self
            .lock()
            .iter()
            .filter(|party| !party.finished.load(Ordering::Acquire))
            .filter_map(|party| {
                let abandoned = party.abandoned.load(Ordering::Acquire);
                let silent_for =
                    Duration::from_nanos(now_ns.saturating_sub(party.last_beat_ns.load(Ordering::Acquire)));
                (abandoned || silent_for > max_silence).then(|| Stall {
                    name: party.name.clone(),
                    silent_for,
                    stage: Stage::ALL.get(usize::from(party.stage.load(Ordering::Relaxed))).copied(),
                    abandoned,
                })
            })
            .collect();
        if stalls.is_empty() {
            Ok(())
        } else {
            Err(stalls)
        }
    }

    fn nanos_since_origin(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.origin).as_nanos()).unwrap_or(u64::MAX)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Party>>> {
        // Every critical section is a single push, scan or retain: a poisoned list is still whole.
        lock(&self.parties)
    }
}

/// A pipeline's (or stage's) link to [`Liveness`]. Dropping it without [`LivenessHandle::finish`]
/// marks the party abandoned, which stops the watchdog: a pipeline thread that died is a failure.
#[derive(Debug)]
pub struct LivenessHandle {
    liveness: Arc<Liveness>,
    party: Arc<Party>,
}

impl LivenessHandle {
    /// Progress: a frame went through, or an idle-but-healthy wait ended normally.
    pub fn beat(&self) {
        self.party.stage.store(NO_STAGE, Ordering::Relaxed);
        self.party.last_beat_ns.store(self.liveness.nanos_since_origin(Instant::now()), Ordering::Release);
    }

    /// Records the stage being entered, so that a stall report says where the pipeline hangs.
    pub fn enter(&self, stage: Stage) {
        let index = Stage::ALL.iter().position(|s| *s == stage).unwrap_or(usize::from(NO_STAGE));
        self.party.stage.store(u8::try_from(index).unwrap_or(NO_STAGE), Ordering::Relaxed);
    }

    /// The party is done and healthy (e.g. a `once` image source reached its end): it no longer
    /// needs to beat, and is removed from the registry.
    pub fn finish(self) {
        self.party.finished.store(true, Ordering::Release);
        self.liveness.lock().retain(|party| !Arc::ptr_eq(party, &self.party));
    }
}

impl Drop for LivenessHandle {
    fn drop(&mut self) {
        if !self.party.finished.load(Ordering::Acquire) {
            self.party.abandoned.store(true, Ordering::Release);
        }
    }
}

/// What one watchdog check did.
#[derive(Debug, Clone, PartialEq)]
pub enum WatchdogTick {
    /// Everything alive: `WATCHDOG=1` was sent.
    KeptAlive,
    /// Something stalled: no keep-alive was sent.
    Withheld(Vec<Stall>),
}

/// Sends `WATCHDOG=1` while every party of a [`Liveness`] makes progress.
///
/// The daemon calls [`WatchdogKeeper::tick`] every [`WatchdogKeeper::period`] (half the
/// watchdog timeout, as sd_watchdog_enabled(3) recommends), or awaits [`WatchdogKeeper::run`].
#[derive(Debug)]
pub struct WatchdogKeeper {
    notifier: Arc<Notifier>,
    liveness: Arc<Liveness>,
    max_silence: Duration,
    withholding: bool,
}

impl WatchdogKeeper {
    /// `max_silence`: the longest a party may go without a beat and still count as alive; pick it
    /// above the slowest expected frame interval and below the watchdog timeout.
    pub fn new(notifier: Arc<Notifier>, liveness: Arc<Liveness>, max_silence: Duration) -> WatchdogKeeper {
        WatchdogKeeper { notifier, liveness, max_silence, withholding: false }
    }

    /// Half the watchdog timeout, or `None` when systemd set no watchdog.
    pub fn period(&self) -> Option<Duration> {
        self.notifier.watchdog_interval().map(|timeout| timeout / 2)
    }

    /// Checks liveness now and sends a keep-alive when everything is alive.
    pub fn tick(&mut self) -> WatchdogTick {
        self.tick_at(Instant::now())
    }

    /// [`WatchdogKeeper::tick`] as seen at `now`. Logs once when keep-alives stop and once when
    /// they resume, not on every tick.
    pub fn tick_at(&mut self, now: Instant) -> WatchdogTick {
        match self.liveness.all_alive_at(now, self.max_silence) {
            Ok(()) => {
                if self.withholding {
                    log::info!("all pipelines make progress again; watchdog keep-alives resume");
                    self.withholding = false;
                }
                if let Err(e) = self.notifier.watchdog() {
                    log::warn!("{e}");
                }
                WatchdogTick::KeptAlive
            }
            Err(stalls) => {
                if !self.withholding {
                    let list: Vec<String> = stalls.iter().map(Stall::to_string).collect();
                    log::error!("withholding watchdog keep-alives (systemd will restart us): {}", list.join("; "));
                    self.withholding = true;
                }
                WatchdogTick::Withheld(stalls)
            }
        }
    }

    /// Ticks every [`WatchdogKeeper::period`] until `shutdown` completes; returns at once when
    /// systemd set no watchdog.
    pub async fn run(mut self, shutdown: impl std::future::Future<Output = ()>) {
        let Some(period) = self.period().filter(|p| !p.is_zero()) else {
            return;
        };
        let mut interval = tokio::time::interval(period);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                _ = &mut shutdown => return,
                _ = interval.tick() => {
                    self.tick();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disabled_notifier_is_a_silent_no_op() {
        let notifier = Notifier::disabled();
        assert!(!notifier.is_active());
        notifier.ready().expect("no-op");
        notifier.status("x").expect("no-op");
        notifier.watchdog().expect("no-op");
        assert_eq!(notifier.watchdog_interval(), None);
    }

    #[test]
    fn timeouts_beyond_u32_microseconds_are_clamped() {
        assert_eq!(clamp_usec(Duration::from_secs(90)), 90_000_000);
        assert_eq!(clamp_usec(Duration::from_secs(10_000)), u32::MAX);
    }

    #[test]
    fn stalled_party_names_its_stage() {
        let liveness = Liveness::new();
        let front = liveness.register("front");
        front.enter(Stage::Infer);
        let now = Instant::now();
        let stalls = liveness.all_alive_at(now + Duration::from_secs(10), Duration::from_secs(5)).unwrap_err();
        assert_eq!(stalls.len(), 1);
        assert_eq!(stalls[0].stage, Some(Stage::Infer));
        assert!(stalls[0].to_string().contains("front") && stalls[0].to_string().contains("infer"));
        front.beat();
        assert_eq!(liveness.all_alive_at(Instant::now(), Duration::from_secs(5)), Ok(()));
    }

    #[test]
    fn finished_parties_are_healthy_and_dropped_ones_are_not() {
        let liveness = Liveness::new();
        let once = liveness.register("once");
        let crashed = liveness.register("crashed");
        once.finish();
        drop(crashed);
        let stalls = liveness.all_alive_at(Instant::now(), Duration::from_secs(60)).unwrap_err();
        assert_eq!(stalls.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["crashed"]);
        assert!(stalls[0].abandoned);
    }
}
