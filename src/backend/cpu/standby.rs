//! Keeping a busy worker's preprocessing threads awake across the end of its inference.
//!
//! Owns: [`StandBy`], which, while an inference runs, asks every thread of the worker's
//! preprocessing pool to sleep until shortly before the inference is expected to end and then to
//! wait awake — giving its core to any other thread that wants it — until the next frame's
//! preprocessing starts ([`StandBy::release`]) or a short while after the next frame was due. It
//! arms only for a worker whose frames come back to back (the next one was waiting when the last
//! inference ended); an idle worker's threads sleep as before. Must not: keep a pool thread past
//! `release` (the frame's tasks queue behind it), arm for an idle worker, or preprocess.
//!
//! Why: a preprocessing thread asleep when the next frame comes must be woken first — an
//! inter-processor interrupt, on a virtual machine a trip through the hypervisor — and the frame's
//! preprocessing ends only once every thread has taken its task. Measured on the 16-core virtual Xeon behind the GPU
//! machine (docs/src/performance/cpu-engines.md): a 768×576 frame preprocessed in 0.15 ms by 16
//! threads with nothing else running took 0.24 ms between inferences.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::sys::lock::{lock, wait_timeout_while};

/// A frame counts as back to back when its preprocessing started at most this long after the
/// previous inference ended (a frame that was waiting: the worker only decoded the outputs).
const BACK_TO_BACK: Duration = Duration::from_millis(1);
/// How long before the expected end of an inference the threads wake: each wakes by a timer of
/// its own, and a timer's wake-up on a virtual machine can be late by tens of microseconds.
const WAKE_EARLY: Duration = Duration::from_micros(200);
/// How long after the next frame was due (the expected end of the inference and the usual gap
/// after it) the threads give up waiting awake and go back to sleep.
const GIVE_UP_AFTER: Duration = Duration::from_micros(500);

/// One worker's stand-by state: how long its inferences take and what follows them.
pub(super) struct StandBy {
    shared: Arc<Shared>,
    /// The number of the last arming (0: none yet).
    armed: u64,
    /// How long an inference takes: the exponentially weighted mean of the last ones.
    inference: Option<Duration>,
    /// When the running inference started.
    inference_started: Option<Instant>,
    /// When the last inference ended, and how long after it the next preprocessing on the pool
    /// started; taken by the next arming, so a frame preprocessed without the pool (beside an
    /// inference, on the calling thread alone) arms nothing.
    inference_ended: Option<Instant>,
    gap: Option<Duration>,
}

/// What the waiting threads read.
struct Shared {
    /// The number of the last released arming: a thread that stands by for it or an earlier one
    /// returns to the pool.
    released: AtomicU64,
    sleeping: Mutex<()>,
    wake: Condvar,
}

/// When the threads of one arming wake, and when they give up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Window {
    wake_at: Instant,
    give_up_at: Instant,
}

impl StandBy {
    pub(super) fn new() -> StandBy {
        StandBy {
            shared: Arc::new(Shared { released: AtomicU64::new(0), sleeping: Mutex::new(()), wake: Condvar::new() }),
            armed: 0,
            inference: None,
            inference_started: None,
            inference_ended: None,
            gap: None,
        }
    }

    /// A frame's preprocessing starts: every thread standing by returns to the pool now.
    pub(super) fn release(&mut self) {
        let now = Instant::now();
        self.gap = self.inference_ended.map(|ended| now.saturating_duration_since(ended));
        if self.shared.released.load(Ordering::Acquire) < self.armed {
            self.shared.released.store(self.armed, Ordering::Release);
            // Taken so that a thread between its check and its wait is either past the check's
            // reading of `released` or already waiting, and so is woken.
            drop(lock(&self.shared.sleeping));
            self.shared.wake.notify_all();
        }
    }

    /// An inference starts: for a back-to-back worker, every thread of `pool` stands by for the
    /// next frame.
    pub(super) fn inference_starts(&mut self, pool: &rayon::ThreadPool) {
        let now = Instant::now();
        self.inference_started = Some(now);
        let Some(window) = window(now, self.inference, self.gap.take()) else { return };
        self.armed += 1;
        let (arming, shared) = (self.armed, Arc::clone(&self.shared));
        pool.spawn_broadcast(move |_| shared.stand_by(arming, window));
    }

    /// The inference has ended.
    pub(super) fn inference_ended(&mut self) {
        let now = Instant::now();
        if let Some(started) = self.inference_started.take() {
            let took = now.saturating_duration_since(started);
            self.inference = Some(match self.inference {
                Some(mean) => (mean * 7 + took) / 8,
                None => took,
            });
        }
        self.inference_ended = Some(now);
    }
}

impl Drop for StandBy {
    fn drop(&mut self) {
        self.release();
    }
}

impl Shared {
    /// One pool thread's stand-by: asleep until the window opens, then awake until released or
    /// the window closes.
    fn stand_by(&self, arming: u64, window: Window) {
        let released = || self.released.load(Ordering::Acquire) >= arming;
        let asleep_for = window.wake_at.saturating_duration_since(Instant::now());
        if !asleep_for.is_zero() {
            let guard = lock(&self.sleeping);
            drop(wait_timeout_while(&self.wake, guard, asleep_for, |_| !released()));
        }
        while !released() && Instant::now() < window.give_up_at {
            std::thread::yield_now();
        }
    }
}

/// The stand-by window of an inference that starts at `now`, given how long inferences take and
/// how long the last one was followed by nothing (the gap before the next preprocessing); none
/// for a worker whose frames are not back to back, or before one inference has been timed.
fn window(now: Instant, inference: Option<Duration>, gap: Option<Duration>) -> Option<Window> {
    let (inference, gap) = (inference?, gap?);
    if gap > BACK_TO_BACK {
        return None;
    }
    let wake_at = now + inference.saturating_sub(WAKE_EARLY);
    Some(Window { wake_at, give_up_at: now + inference + gap + GIVE_UP_AFTER })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    fn pool(threads: usize) -> rayon::ThreadPool {
        rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("pool")
    }

    /// A stand-by that has seen one back-to-back frame of an inference of `inference`. The gap is
    /// set rather than measured: on a loaded machine (the aarch64 suite runs under qemu) two
    /// readings of the clock a line apart can be more than `BACK_TO_BACK` apart.
    fn back_to_back(inference: Duration) -> StandBy {
        let mut standby = StandBy::new();
        standby.inference = Some(inference);
        standby.gap = Some(Duration::ZERO);
        standby
    }

    /// Whether every thread of `pool` runs a job handed to it now within a minute (a liveness
    /// bound, not a timing).
    fn every_thread_runs_a_job(pool: &rayon::ThreadPool) -> bool {
        let (sent, received) = mpsc::channel();
        pool.spawn_broadcast(move |_| sent.send(()).expect("send"));
        (0..pool.current_num_threads()).all(|_| received.recv_timeout(Duration::from_secs(60)).is_ok())
    }

    #[test]
    fn only_a_back_to_back_worker_with_a_timed_inference_stands_by() {
        let now = Instant::now();
        let ms = Duration::from_millis;
        assert_eq!(window(now, None, Some(ms(0))), None, "no inference timed yet");
        assert_eq!(window(now, Some(ms(4)), None), None, "no frame after an inference yet");
        assert_eq!(window(now, Some(ms(4)), Some(ms(30))), None, "an idle worker: its threads sleep");
        let gap = Duration::from_micros(200);
        let open = window(now, Some(ms(4)), Some(gap)).expect("back to back");
        assert_eq!(open.wake_at, now + ms(4) - WAKE_EARLY, "wakes shortly before the inference ends");
        assert_eq!(open.give_up_at, now + ms(4) + gap + GIVE_UP_AFTER, "gives up after the frame was due");
        let tiny = window(now, Some(Duration::from_micros(50)), Some(gap)).expect("back to back");
        assert_eq!(tiny.wake_at, now, "an inference shorter than the early wake: awake at once");
    }

    #[test]
    fn a_release_hands_every_thread_back_to_the_pool_whether_asleep_or_awake() {
        let pool = pool(3);
        for inference in [Duration::from_secs(3600), Duration::ZERO] {
            let mut standby = back_to_back(inference);
            standby.inference_starts(&pool);
            assert_eq!(standby.armed, 1, "armed for a back-to-back frame");
            standby.release();
            assert!(every_thread_runs_a_job(&pool), "a thread stayed with the stand-by ({inference:?} inference)");
        }
    }

    #[test]
    fn an_unreleased_stand_by_gives_the_threads_back_when_its_window_closes() {
        let pool = pool(2);
        let mut standby = back_to_back(Duration::from_millis(1));
        standby.inference_starts(&pool);
        standby.inference_ended();
        assert!(every_thread_runs_a_job(&pool), "threads kept past the window");
        standby.release();
        assert_eq!(standby.shared.released.load(Ordering::Acquire), 1, "the late frame releases the arming");
    }

    #[test]
    fn a_release_measures_the_gap_since_the_inference_ended() {
        let mut standby = StandBy::new();
        standby.release();
        assert_eq!(standby.gap, None, "no inference has ended yet");
        let before = Instant::now();
        standby.inference_ended();
        standby.release();
        let at_most = before.elapsed();
        let gap = standby.gap.expect("a gap after the inference ended");
        assert!(gap <= at_most, "{gap:?} is longer than {at_most:?} between the two calls");
    }

    #[test]
    fn a_frame_preprocessed_without_the_pool_arms_nothing() {
        let pool = pool(2);
        let mut standby = back_to_back(Duration::from_millis(1));
        standby.inference_starts(&pool);
        standby.inference_ended();
        // The next frame was preprocessed beside the inference, on the calling thread alone.
        standby.inference_starts(&pool);
        assert_eq!(standby.armed, 1, "armed again though the pool was not used since");
        standby.release();
    }

    #[test]
    fn an_idle_worker_never_arms_and_inference_times_are_averaged() {
        let pool = pool(2);
        let mut standby = StandBy::new();
        standby.inference_starts(&pool);
        assert_eq!(standby.armed, 0, "nothing timed yet");
        standby.inference_ended();
        let first = standby.inference.expect("timed");
        std::thread::sleep(BACK_TO_BACK * 3);
        standby.release();
        standby.inference_starts(&pool);
        assert_eq!(standby.armed, 0, "the frame came long after the inference: an idle worker");
        standby.inference = Some(Duration::from_millis(8));
        standby.inference_started = Some(Instant::now() - Duration::from_millis(16));
        standby.inference_ended();
        let mean = standby.inference.expect("timed");
        assert!(mean >= Duration::from_millis(9) && mean < Duration::from_millis(16), "{first:?} then {mean:?}");
    }
}
