//! How the fast path's participants (the calling thread and its pool's threads) share out one
//! frame's chunks of output rows.
//!
//! Owns: [`Shares`], the chunks of one frame and which participant takes which next. Each
//! participant has its own run of consecutive chunks and takes them from the front, so that one
//! chunk's last filtered source rows serve the next one's first; a participant whose run is done
//! takes the last chunk of the run with the most left. A participant that starts late (a pool
//! thread that had to be woken first, or was preempted) therefore finds its run partly or wholly
//! done by the others instead of holding up the frame for a whole band.
//! Must not: know what a chunk is, or run one (the caller does, without the lock).

use std::ops::Range;
use std::sync::Mutex;

use crate::sys::lock::lock;

/// The chunks of one frame, each taken once.
pub(super) struct Shares<T> {
    state: Mutex<State<T>>,
}

struct State<T> {
    chunks: Vec<Option<T>>,
    /// The chunks each participant has not taken yet, by index into `chunks`.
    runs: Vec<Range<usize>>,
}

impl<T> Shares<T> {
    /// Splits `chunks` (in order) into `participants` runs as even as they can be, some later
    /// runs one longer where they cannot.
    pub(super) fn new(chunks: Vec<T>, participants: usize) -> Self {
        let participants = participants.max(1);
        let count = chunks.len();
        let runs =
            (0..participants).map(|index| count * index / participants..count * (index + 1) / participants).collect();
        Shares { state: Mutex::new(State { chunks: chunks.into_iter().map(Some).collect(), runs }) }
    }

    /// The next chunk for `participant`: the front of its own run, else the back of the longest
    /// run left; `None` once every chunk has been taken.
    pub(super) fn next(&self, participant: usize) -> Option<T> {
        let mut state = lock(&self.state);
        let own = state.runs.get_mut(participant).and_then(Iterator::next);
        let index = match own {
            Some(index) => index,
            None => state.runs.iter_mut().max_by_key(|run| run.len()).and_then(DoubleEndedIterator::next_back)?,
        };
        state.chunks[index].take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(shares: &Shares<usize>, participant: usize) -> Vec<usize> {
        std::iter::from_fn(|| shares.next(participant)).collect()
    }

    #[test]
    fn each_participant_takes_its_own_run_in_order() {
        let shares = Shares::new((0..7).collect(), 3);
        assert_eq!(
            [shares.next(0), shares.next(1), shares.next(2), shares.next(0)],
            [Some(0), Some(2), Some(4), Some(1)]
        );
        assert_eq!(drain(&shares, 2), [5, 6, 3], "its own run, then the back of the longest other");
        assert!(drain(&shares, 0).is_empty() && drain(&shares, 1).is_empty(), "every chunk once");
    }

    #[test]
    fn a_participant_that_never_starts_has_its_run_done_by_the_others() {
        let shares = Shares::new((0..8).collect(), 4);
        let mut done = drain(&shares, 0);
        assert_eq!(done, [0, 1, 7, 5, 3, 6, 4, 2], "then the back of the longest run, the last of equals");
        done.sort_unstable();
        assert_eq!(done, (0..8).collect::<Vec<_>>());
        assert!(drain(&shares, 3).is_empty(), "a late participant finds nothing left");
    }

    #[test]
    fn more_participants_than_chunks_leaves_some_runs_empty() {
        let shares = Shares::new(vec!['a', 'b'], 4);
        assert_eq!((shares.next(1), shares.next(3)), (Some('a'), Some('b')));
        assert_eq!((shares.next(0), shares.next(2)), (None, None));
        assert_eq!(Shares::new(vec![1], 0).next(0), Some(1), "at least one participant");
    }
}
