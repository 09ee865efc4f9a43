//! A webhook's queue and the task that empties it: events in the order they happened, one
//! request each, retried with back-off, and flushed within a bound at shutdown.
//!
//! Owns: [`Queue`] — the bounded queue the outlet hands events to (the oldest dropped and counted
//! when it is full, never a wait) and the counters the figures read — and [`deliver`], the task:
//! an event is posted until the receiver takes it, refuses it, or the retries run out; a failed
//! attempt waits `retry_min_ms`, doubling up to `retry_max_ms` (or the receiver's `Retry-After`,
//! capped there) before the next. At shutdown ([`Queue::close`]) the queue takes nothing more and
//! the task delivers what it holds until `shutdown_flush_ms` has passed; whatever is left then is
//! dropped, counted and logged. Must not: block the caller of [`Queue::push`] (the inference
//! worker), or let a receiver hold the task beyond `timeout_ms` per attempt.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use serde::Serialize;
use tokio::sync::{watch, Notify};
use tokio::time::Instant;

use super::client::{Attempt, Client};
use crate::sys::lock::lock;

/// How a webhook retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts after the first.
    pub retries: u32,
    pub min: Duration,
    pub max: Duration,
}

impl RetryPolicy {
    /// The wait after the `failed`-th failed attempt (1 = the first): `min` doubled per earlier
    /// failure, at most `max`; the receiver's `asked` wait instead, at most `max`.
    pub fn wait(&self, failed: u32, asked: Option<Duration>) -> Duration {
        let doubled = self.min.saturating_mul(2u32.saturating_pow(failed.saturating_sub(1)));
        asked.unwrap_or(doubled).min(self.max)
    }
}

/// The counters of one webhook (its figures).
#[derive(Debug, Default)]
struct Counters {
    delivered: AtomicU64,
    dropped: AtomicU64,
    retries: AtomicU64,
}

/// What the queue holds, under its lock.
#[derive(Debug)]
struct Waiting {
    events: VecDeque<Bytes>,
    /// The task holds an event it took from `events` (still counted as queued).
    in_flight: bool,
    /// Shutdown began: nothing more is taken.
    closed: bool,
    /// Why the latest event was dropped, for the figures.
    last_failure: Option<String>,
}

/// A webhook's queue of event messages, shared by the outlet and its task.
#[derive(Debug)]
pub struct Queue {
    name: String,
    capacity: usize,
    waiting: Mutex<Waiting>,
    wake: Notify,
    counters: Counters,
    /// When the flush at shutdown must end; `None` until shutdown.
    deadline: watch::Sender<Option<Instant>>,
}

/// A webhook's figures (telemetry's `outlets.<name>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WebhookStats {
    /// Events waiting (the one being delivered included).
    pub queued: usize,
    /// Events the receiver took (a 2xx answer).
    pub delivered: u64,
    /// Events dropped: the queue full, refused by the receiver, undelivered after every retry, or
    /// left when the flush at shutdown ran out.
    pub dropped: u64,
    /// Attempts after a failed one.
    pub retries: u64,
    /// Why the latest event was dropped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_failure: Option<String>,
}

impl Queue {
    /// An empty queue of at most `capacity` events, for the webhook `name` (the log names it).
    pub fn new(name: &str, capacity: usize) -> Queue {
        Queue {
            name: name.to_owned(),
            capacity,
            waiting: Mutex::new(Waiting {
                events: VecDeque::new(),
                in_flight: false,
                closed: false,
                last_failure: None,
            }),
            wake: Notify::new(),
            counters: Counters::default(),
            deadline: watch::channel(None).0,
        }
    }

    /// Queues `event`; when the queue is full its oldest event is dropped (and counted) instead of
    /// waiting. After [`Queue::close`] the event itself is dropped. Never blocks.
    pub fn push(&self, event: Bytes) {
        let mut waiting = lock(&self.waiting);
        if waiting.closed {
            drop(waiting);
            self.dropped("it came after the shutdown began");
            return;
        }
        let full = waiting.events.len() >= self.capacity;
        if full {
            waiting.events.pop_front();
        }
        waiting.events.push_back(event);
        drop(waiting);
        if full {
            self.dropped("its queue was full");
        }
        self.wake.notify_one();
    }

    /// Takes nothing more and gives the task until `flush` from now to deliver what waits.
    pub fn close(&self, flush: Duration) {
        lock(&self.waiting).closed = true;
        self.deadline.send_replace(Some(Instant::now() + flush));
        self.wake.notify_one();
    }

    pub fn stats(&self) -> WebhookStats {
        let waiting = lock(&self.waiting);
        WebhookStats {
            queued: waiting.events.len() + usize::from(waiting.in_flight),
            delivered: self.counters.delivered.load(Ordering::Relaxed),
            dropped: self.counters.dropped.load(Ordering::Relaxed),
            retries: self.counters.retries.load(Ordering::Relaxed),
            last_failure: waiting.last_failure.clone(),
        }
    }

    /// Counts a dropped event, and logs the first of a run of drops for one reason.
    fn dropped(&self, why: &str) {
        let count = self.counters.dropped.fetch_add(1, Ordering::Relaxed) + 1;
        let mut waiting = lock(&self.waiting);
        if waiting.last_failure.as_deref() != Some(why) {
            log::warn!("webhook {}: an event was dropped: {why} ({count} dropped since start)", self.name);
            waiting.last_failure = Some(why.to_owned());
        }
    }

    /// The next event to deliver, taken from the queue (still counted as queued until
    /// [`Queue::done`]); `None` once the queue is closed and empty.
    async fn next(&self) -> Option<Bytes> {
        loop {
            let notified = self.wake.notified();
            {
                let mut waiting = lock(&self.waiting);
                if let Some(event) = waiting.events.pop_front() {
                    waiting.in_flight = true;
                    return Some(event);
                }
                if waiting.closed {
                    return None;
                }
            }
            notified.await;
        }
    }

    /// The event [`Queue::next`] gave is done with (delivered or dropped).
    fn done(&self) {
        lock(&self.waiting).in_flight = false;
    }

    /// `work`, cut short when the flush deadline passes (set now, or later by [`Queue::close`]).
    async fn before_deadline<T>(&self, work: impl std::future::Future<Output = T>) -> Option<T> {
        let mut deadline = self.deadline.subscribe();
        tokio::pin!(work);
        loop {
            let until = *deadline.borrow_and_update();
            let expired = async {
                match until {
                    Some(until) => tokio::time::sleep_until(until).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                done = &mut work => return Some(done),
                () = expired => return None,
                // The deadline was set (shutdown): wait for it instead.
                Ok(()) = deadline.changed() => {}
            }
        }
    }

    /// Drops what is left when the flush ran out (`in_flight`: the event being delivered, besides
    /// the queue), counting and logging it.
    fn abandon(&self, in_flight: usize) {
        let mut waiting = lock(&self.waiting);
        let left = std::mem::take(&mut waiting.events).len() + in_flight;
        if left > 0 {
            self.counters.dropped.fetch_add(left as u64, Ordering::Relaxed);
            waiting.last_failure = Some("left when the flush at shutdown ran out".into());
            log::warn!("webhook {}: {left} event(s) not delivered: the flush at shutdown ran out", self.name);
        }
    }
}

/// The task of one webhook: delivers every event of `queue` through `client` until the queue is
/// closed and empty, or the flush at shutdown runs out.
pub async fn deliver(queue: Arc<Queue>, client: Client, policy: RetryPolicy) {
    loop {
        let Some(next) = queue.before_deadline(queue.next()).await else {
            queue.abandon(0);
            return;
        };
        // Closed and empty: everything was delivered or dropped.
        let Some(event) = next else { return };
        let outcome = queue.before_deadline(attempts(&queue, &client, policy, event)).await;
        queue.done();
        match outcome {
            Some(Ok(())) => {
                queue.counters.delivered.fetch_add(1, Ordering::Relaxed);
            }
            Some(Err(why)) => queue.dropped(&why),
            None => {
                queue.abandon(1);
                return;
            }
        }
    }
}

/// Attempts of one event: `Ok` once delivered, `Err` why it was given up.
async fn attempts(queue: &Queue, client: &Client, policy: RetryPolicy, event: Bytes) -> Result<(), String> {
    let mut failed = 0;
    loop {
        match client.post(event.clone()).await {
            Attempt::Delivered => return Ok(()),
            Attempt::Refused(why) => return Err(why),
            Attempt::Retry { why, after } => {
                failed += 1;
                if failed > policy.retries {
                    return Err(format!("{why} ({failed} attempts)"));
                }
                let wait = policy.wait(failed, after);
                log::debug!("webhook {}: {why}; attempt {} in {} ms", queue.name, failed + 1, wait.as_millis());
                queue.counters.retries.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(wait).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_doubles_from_the_minimum_to_the_maximum_and_a_receivers_wish_is_capped_there() {
        let policy = RetryPolicy { retries: 5, min: Duration::from_millis(500), max: Duration::from_secs(3) };
        let waits: Vec<u128> = (1..=5).map(|failed| policy.wait(failed, None).as_millis()).collect();
        assert_eq!(waits, [500, 1000, 2000, 3000, 3000]);
        assert_eq!(policy.wait(1, Some(Duration::from_secs(2))), Duration::from_secs(2));
        assert_eq!(policy.wait(1, Some(Duration::from_secs(3600))), Duration::from_secs(3));
        assert_eq!(policy.wait(u32::MAX, None), Duration::from_secs(3), "no overflow");
    }

    #[test]
    fn a_full_queue_drops_its_oldest_a_closed_one_drops_what_comes_and_each_is_counted() {
        let queue = Queue::new("hook", 2);
        for event in ["a", "b", "c"] {
            queue.push(Bytes::from_static(event.as_bytes()));
        }
        let stats = queue.stats();
        assert_eq!((stats.queued, stats.dropped), (2, 1));
        assert_eq!(stats.last_failure.as_deref(), Some("its queue was full"));
        let kept: Vec<Bytes> = lock(&queue.waiting).events.iter().cloned().collect();
        assert_eq!(kept, [Bytes::from_static(b"b"), Bytes::from_static(b"c")], "the oldest went");
        queue.close(Duration::ZERO);
        queue.push(Bytes::from_static(b"d"));
        assert_eq!(queue.stats().dropped, 2);
        queue.abandon(0);
        let stats = queue.stats();
        assert_eq!((stats.queued, stats.dropped, stats.delivered), (0, 4, 0), "what was left counts as dropped");
    }
}
