//! The dispatcher: hands everything to every outlet, in the order they were added, reads their
//! figures and stops them all alike (as Frigate's `Dispatcher` does its communicators).
//!
//! Owns: [`Outlets`]. Must not: know any outlet (it sees only [`Outlet`]), or stop one outlet
//! after another: [`Outlets::stop`] stops them at once, so the daemon's stop takes as long as the
//! slowest outlet's bound, not their sum.

use std::sync::Arc;

use super::figures::OutletFigures;
use super::outlet::{DaemonStatus, FrameResult, Outlet, Stop, TrackingUpdate};
use crate::config::Config;
use crate::controls::ControlValues;
use crate::frame::FrameSlot;
use crate::service::telemetry::TelemetryReport;

/// Every outlet of the daemon; clones share them.
#[derive(Clone, Default)]
pub struct Outlets(Arc<[Arc<dyn Outlet>]>);

impl std::fmt::Debug for Outlets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.iter().map(|outlet| outlet.name())).finish()
    }
}

/// One outlet's figures under its name.
#[derive(Debug, Clone, PartialEq)]
pub struct NamedFigures {
    pub outlet: String,
    pub figures: OutletFigures,
}

impl Outlets {
    pub fn new(outlets: Vec<Arc<dyn Outlet>>) -> Outlets {
        Outlets(outlets.into())
    }

    /// These outlets and `more` after them (outlets that start later: the live view, the
    /// recorder).
    pub fn with(&self, more: impl IntoIterator<Item = Arc<dyn Outlet>>) -> Outlets {
        Outlets(self.0.iter().cloned().chain(more).collect())
    }

    pub fn starting(&self, config: &Config) {
        self.0.iter().for_each(|outlet| outlet.starting(config));
    }

    pub fn frame(&self, frame: &FrameResult<'_>) {
        self.0.iter().for_each(|outlet| outlet.frame(frame));
    }

    pub fn picture(&self, camera: &str, slot: &FrameSlot, snapshot: Option<&[u8]>) {
        self.0.iter().for_each(|outlet| outlet.picture(camera, slot, snapshot));
    }

    pub fn motion(&self, camera: &str, moving: bool) {
        self.0.iter().for_each(|outlet| outlet.motion(camera, moving));
    }

    pub fn detection_stopped(&self, camera: &str) {
        self.0.iter().for_each(|outlet| outlet.detection_stopped(camera));
    }

    pub fn camera_offline(&self, camera: &str) {
        self.0.iter().for_each(|outlet| outlet.camera_offline(camera));
    }

    /// An empty update is not handed over.
    pub fn tracking(&self, camera: &str, update: &TrackingUpdate<'_>) {
        if !update.is_empty() {
            self.0.iter().for_each(|outlet| outlet.tracking(camera, update));
        }
    }

    pub fn reconfigured(&self, config: &Config) {
        self.0.iter().for_each(|outlet| outlet.reconfigured(config));
    }

    pub fn controls(&self, values: &ControlValues) {
        self.0.iter().for_each(|outlet| outlet.controls(values));
    }

    pub fn status(&self, status: DaemonStatus) {
        self.0.iter().for_each(|outlet| outlet.status(status));
    }

    pub fn telemetry(&self, report: &TelemetryReport<'_>) {
        self.0.iter().for_each(|outlet| outlet.telemetry(report));
    }

    /// The figures of every outlet that has some, in the order the outlets were added.
    pub fn figures(&self) -> Vec<NamedFigures> {
        self.0
            .iter()
            .filter_map(|outlet| Some(NamedFigures { outlet: outlet.name().to_owned(), figures: outlet.figures()? }))
            .collect()
    }

    /// The daemon has begun to stop ([`Outlet::stopping`]).
    pub fn stopping(&self) {
        self.0.iter().for_each(|outlet| outlet.stopping());
    }

    /// Stops every outlet at once and waits until each has ended (each within its own bound).
    /// Must be called inside a tokio runtime.
    pub async fn stop(&self, why: Stop) {
        let stopping: Vec<_> =
            self.0.iter().map(|outlet| (outlet.name().to_owned(), tokio::spawn(outlet.clone().stop(why)))).collect();
        for (name, task) in stopping {
            if let Err(error) = task.await {
                log::error!("outlet {name}: its stop failed: {error}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use tokio::sync::Barrier;

    use super::*;
    use crate::publish::outlet::Stopping;

    /// Stops only once every outlet sharing its barrier is stopping too, and counts its stops.
    struct Meeting {
        name: &'static str,
        barrier: Arc<Barrier>,
        stops: AtomicUsize,
    }

    impl Outlet for Meeting {
        fn name(&self) -> &str {
            self.name
        }

        fn figures(&self) -> Option<OutletFigures> {
            (self.name != "quiet").then(|| OutletFigures { connected: Some(true), ..OutletFigures::default() })
        }

        fn stop(self: Arc<Self>, _why: Stop) -> Stopping {
            Box::pin(async move {
                self.barrier.wait().await;
                self.stops.fetch_add(1, Ordering::SeqCst);
            })
        }
    }

    fn meetings(names: &[&'static str]) -> Vec<Arc<Meeting>> {
        let barrier = Arc::new(Barrier::new(names.len()));
        names
            .iter()
            .map(|name| Arc::new(Meeting { name, barrier: barrier.clone(), stops: AtomicUsize::new(0) }))
            .collect()
    }

    #[test]
    fn every_outlet_is_stopped_at_once_not_one_after_another() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().expect("a runtime");
        let all = meetings(&["a", "b", "quiet"]);
        let outlets = Outlets::new(vec![all[0].clone(), all[1].clone()]).with([all[2].clone() as Arc<dyn Outlet>]);
        // One after another, the first would wait at its barrier for ever: the bound only guards that.
        let stopped = runtime
            .block_on(async { tokio::time::timeout(Duration::from_secs(600), outlets.stop(Stop::Shutdown)).await });
        assert!(stopped.is_ok(), "the outlets were not stopping together");
        assert_eq!(all.iter().map(|outlet| outlet.stops.load(Ordering::SeqCst)).collect::<Vec<_>>(), [1, 1, 1]);
    }

    #[test]
    fn figures_come_under_each_outlets_name_in_order_and_only_from_outlets_that_have_some() {
        let outlets = Outlets::new(meetings(&["b", "quiet", "a"]).into_iter().map(|m| m as Arc<dyn Outlet>).collect());
        let names: Vec<String> = outlets.figures().into_iter().map(|named| named.outlet).collect();
        assert_eq!(names, ["b", "a"]);
        assert_eq!(format!("{outlets:?}"), r#"["b", "quiet", "a"]"#);
    }
}
