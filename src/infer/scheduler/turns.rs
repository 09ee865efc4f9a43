//! The order in which the two sessions of an overlapping inference worker take turns.
//!
//! Owns: [`Turns`], the tickets a worker's two threads draw as they take frames, and the two turns
//! those tickets wait for: inference (one at a time, on the worker's cores, in ticket order) and
//! delivery to the sink (in ticket order, so that a camera's frames reach its tracker in capture
//! order although the two threads prepare them at the same time). Must not: know about frames,
//! sessions or cameras, or wait without looking at the stop flag.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use crate::sys::lock::{lock, wait_timeout_while};

/// How often a waiting thread looks at the stop flag.
const POLL: Duration = Duration::from_millis(100);

/// Tickets and turns of one worker's two threads.
#[derive(Default)]
pub(super) struct Turns {
    state: Mutex<TurnState>,
    changed: Condvar,
}

#[derive(Default)]
struct TurnState {
    /// The next ticket to hand out.
    issued: u64,
    /// The ticket whose inference runs next (or now).
    infer: u64,
    /// The ticket whose frame goes to the sink next.
    deliver: u64,
}

/// Which turn a ticket waits for.
#[derive(Clone, Copy)]
enum Turn {
    Infer,
    Deliver,
}

impl Turns {
    /// The next ticket. Draw it in the same critical section that takes the frame, so that tickets
    /// follow the order in which frames were taken.
    pub(super) fn issue(&self) -> u64 {
        let mut state = lock(&self.state);
        let ticket = state.issued;
        state.issued += 1;
        ticket
    }

    /// Whether an earlier ticket's inference is still to finish: the frame of `ticket` is then
    /// prepared beside an inference (on one thread). Asked of the tickets, not of what runs at this
    /// instant, so that a thread that has just handed over the turn never takes the cores from
    /// the inference its partner is about to start.
    pub(super) fn inference_ahead(&self, ticket: u64) -> bool {
        lock(&self.state).infer < ticket
    }

    /// Waits until every earlier ticket's inference is done; false if `stop` was set first.
    pub(super) fn wait_to_infer(&self, ticket: u64, stop: &AtomicBool) -> bool {
        self.wait_for(Turn::Infer, ticket, stop)
    }

    /// `ticket`'s inference is done (or was skipped): the next one may run.
    pub(super) fn inferred(&self, ticket: u64) {
        self.pass(Turn::Infer, ticket);
    }

    /// Waits until every earlier ticket's frame went to the sink; false if `stop` was set first.
    pub(super) fn wait_to_deliver(&self, ticket: u64, stop: &AtomicBool) -> bool {
        self.wait_for(Turn::Deliver, ticket, stop)
    }

    /// `ticket`'s frame went to the sink (or was skipped): the next one may go.
    pub(super) fn delivered(&self, ticket: u64) {
        self.pass(Turn::Deliver, ticket);
    }

    fn wait_for(&self, turn: Turn, ticket: u64, stop: &AtomicBool) -> bool {
        let mut state = lock(&self.state);
        loop {
            let current = match turn {
                Turn::Infer => state.infer,
                Turn::Deliver => state.deliver,
            };
            if current == ticket {
                return true;
            }
            if stop.load(Ordering::SeqCst) {
                return false;
            }
            state = wait_timeout_while(&self.changed, state, POLL, |state| match turn {
                Turn::Infer => state.infer != ticket,
                Turn::Deliver => state.deliver != ticket,
            });
        }
    }

    fn pass(&self, turn: Turn, ticket: u64) {
        let mut state = lock(&self.state);
        match turn {
            Turn::Infer => {
                debug_assert_eq!(state.infer, ticket, "inference turns pass in ticket order");
                state.infer = ticket + 1;
            }
            Turn::Deliver => {
                debug_assert_eq!(state.deliver, ticket, "delivery turns pass in ticket order");
                state.deliver = ticket + 1;
            }
        }
        drop(state);
        self.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn two_threads_infer_one_at_a_time_and_deliver_in_ticket_order() {
        let turns = Arc::new(Turns::default());
        let stop = Arc::new(AtomicBool::new(false));
        let log = Arc::new(Mutex::new(Vec::new()));
        let threads: Vec<_> = (0..2)
            .map(|thread| {
                let (turns, stop, log) = (Arc::clone(&turns), Arc::clone(&stop), Arc::clone(&log));
                std::thread::spawn(move || {
                    for _ in 0..50 {
                        let ticket = turns.issue();
                        // Preparing takes longer for one thread than the other: order must not.
                        std::thread::sleep(Duration::from_micros(50 * (thread + 1)));
                        assert!(turns.wait_to_infer(ticket, &stop));
                        assert!(!turns.inference_ahead(ticket), "no earlier inference is left once it is my turn");
                        lock(&log).push(("infer", ticket));
                        turns.inferred(ticket);
                        assert!(turns.wait_to_deliver(ticket, &stop));
                        lock(&log).push(("deliver", ticket));
                        turns.delivered(ticket);
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().expect("thread");
        }
        let log = lock(&log);
        for kind in ["infer", "deliver"] {
            let tickets: Vec<u64> = log.iter().filter(|(k, _)| *k == kind).map(|(_, t)| *t).collect();
            assert_eq!(tickets, (0..100).collect::<Vec<u64>>(), "{kind} in ticket order");
        }
    }

    #[test]
    fn a_ticket_drawn_while_an_earlier_one_is_still_to_infer_is_prepared_beside_an_inference() {
        let turns = Turns::default();
        let stop = AtomicBool::new(false);
        let (first, second) = (turns.issue(), turns.issue());
        assert!(!turns.inference_ahead(first), "nothing before the first ticket");
        assert!(turns.inference_ahead(second), "the first ticket's inference comes first");
        assert!(turns.wait_to_infer(first, &stop));
        assert!(turns.inference_ahead(second), "and runs now");
        turns.inferred(first);
        assert!(!turns.inference_ahead(second));
    }

    #[test]
    fn a_wait_for_a_turn_that_never_comes_ends_with_the_stop_flag() {
        let turns = Turns::default();
        let stop = AtomicBool::new(false);
        let (first, second) = (turns.issue(), turns.issue());
        assert!(turns.wait_to_infer(first, &stop));
        stop.store(true, Ordering::SeqCst);
        assert!(!turns.wait_to_infer(second, &stop), "ticket 0 never passed its turn");
        assert!(!turns.wait_to_deliver(second, &stop));
    }
}
