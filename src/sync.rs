//! Locking that survives a panicked holder.
//!
//! Owns: [`lock`]. Every mutex of the daemon guards state that stays consistent between
//! statements (counters, rings, per-camera trackers), so a thread that panicked while holding one
//! leaves nothing half-written that the others must not see; the daemon reports the panic where
//! the thread is joined and keeps serving the other cameras. Must not: hide a panic (the thread's
//! join handle still carries it).

use std::sync::{Mutex, MutexGuard};

/// Locks `mutex`, taking the guard back from a holder that panicked.
pub fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn a_mutex_whose_holder_panicked_is_still_usable() {
        let shared = Arc::new(Mutex::new(1));
        let holder = shared.clone();
        let _ = std::thread::spawn(move || {
            let _guard = holder.lock().unwrap();
            panic!("holder fails");
        })
        .join();
        assert!(shared.is_poisoned());
        *lock(&shared) += 1;
        assert_eq!(*lock(&shared), 2);
    }
}
