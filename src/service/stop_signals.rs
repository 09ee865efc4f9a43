//! SIGTERM and SIGINT as a request to stop, from the moment `run` may wait long at start (an engine
//! build it waits for) to the daemon's end.
//!
//! Owns: [`StopSignals`]: listening for both signals on the daemon's runtime (from then on their
//! default action, ending the process at once, is gone), the flag a blocking wait polls (the engine
//! chain's cancel flag) and the wait the main loop selects on. A signal that comes before the main
//! loop runs is kept for it, never lost. Must not: decide what stopping means (its caller does).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;

/// The stop signals, listened for since [`StopSignals::listen`] (see the module doc).
pub struct StopSignals {
    requested: Arc<AtomicBool>,
    received: watch::Receiver<Option<&'static str>>,
}

impl StopSignals {
    /// Listens from now on, on `runtime`; the first signal sets the flag and ends every
    /// [`received`](StopSignals::received) wait (the later ones are caught and change nothing).
    pub fn listen(runtime: &tokio::runtime::Handle) -> std::io::Result<StopSignals> {
        let _entered = runtime.enter();
        let mut terminate = signal(SignalKind::terminate())?;
        let mut interrupt = signal(SignalKind::interrupt())?;
        let requested = Arc::new(AtomicBool::new(false));
        let (tell, received) = watch::channel(None);
        let flag = requested.clone();
        runtime.spawn(async move {
            let name = tokio::select! {
                _ = terminate.recv() => "SIGTERM",
                _ = interrupt.recv() => "SIGINT",
            };
            flag.store(true, Ordering::SeqCst);
            let _ = tell.send(Some(name));
        });
        Ok(StopSignals { requested, received })
    }

    /// Set once a signal came: the cancel flag of a wait that blocks a thread.
    pub fn flag(&self) -> &AtomicBool {
        &self.requested
    }

    /// The signal that came (`SIGTERM`, `SIGINT`), if one did.
    pub fn which(&self) -> Option<&'static str> {
        *self.received.borrow()
    }

    /// The signal, once one comes (at once when one came before).
    pub async fn received(&self) -> &'static str {
        let mut received = self.received.clone();
        loop {
            if let Some(name) = *received.borrow_and_update() {
                return name;
            }
            if received.changed().await.is_err() {
                // The listener is gone without a signal: the runtime is shutting down.
                std::future::pending::<()>().await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signal_before_anyone_waits_is_kept_for_the_wait_and_sets_the_flag() {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("rt");
        let signals = StopSignals::listen(runtime.handle()).expect("listen");
        assert!(!signals.flag().load(Ordering::SeqCst));
        assert_eq!(signals.which(), None);
        // Caught by the listener above, as the daemon's are.
        let sent = std::process::Command::new("kill").args(["-s", "INT", &std::process::id().to_string()]).status();
        assert!(sent.expect("run kill").success());
        let name = runtime.block_on(signals.received());
        assert_eq!((name, signals.which()), ("SIGINT", Some("SIGINT")));
        assert!(signals.flag().load(Ordering::SeqCst));
        assert_eq!(runtime.block_on(signals.received()), "SIGINT", "every later wait ends at once");
    }
}
