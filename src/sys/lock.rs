//! Locking that survives a panicked holder.
//!
//! Owns: [`lock`] and [`wait_timeout_while`]. Every mutex of the daemon guards state that stays consistent between
//! statements (counters, rings, per-camera trackers), so a thread that panicked while holding one
//! leaves nothing half-written that the others must not see; the daemon reports the panic where
//! the thread is joined and keeps serving the other cameras. Must not: hide a panic (the thread's
//! join handle still carries it).

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// Locks `mutex`, taking the guard back from a holder that panicked.
pub fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The lock if it is free now (taken back from a holder that panicked), else `None`: for a thread
/// that must not wait.
pub fn try_lock<T: ?Sized>(mutex: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    match mutex.try_lock() {
        Ok(guard) => Some(guard),
        Err(std::sync::TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => None,
    }
}

/// Waits on `condvar` while `condition` holds, at most `timeout`, taking the guard back from a
/// holder that panicked. The caller checks the state again to tell a timeout from a wake-up.
pub fn wait_timeout_while<'a, T, F>(
    condvar: &Condvar,
    guard: MutexGuard<'a, T>,
    timeout: Duration,
    condition: F,
) -> MutexGuard<'a, T>
where
    F: FnMut(&mut T) -> bool,
{
    match condvar.wait_timeout_while(guard, timeout, condition) {
        Ok((guard, _)) => guard,
        Err(poisoned) => poisoned.into_inner().0,
    }
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
