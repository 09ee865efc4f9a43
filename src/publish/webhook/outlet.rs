//! The webhook outlet: the tracking events one `[[webhook]]` takes, each as its event message
//! (the bytes of `<prefix>/<camera>/events`), handed to the webhook's queue.
//!
//! Owns: [`WebhookOutlet`] — which events it takes (kinds, labels, cameras), encoding each once,
//! its figures and its stop (the queue flushed within `shutdown_flush_ms`). Must not: wait: on the
//! inference worker it only encodes a message of a few hundred bytes and queues it
//! (`super::delivery` owns the network).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::task::JoinHandle;

use super::client::Client;
use super::config::{EventKindChoice, WebhookConfig};
use super::delivery::{deliver, Queue, RetryPolicy};
use crate::detection::Labels;
use crate::publish::event_message::EventMessage;
use crate::publish::figures::{self, Metric, OutletFigures};
use crate::publish::object_event::ObjectEvent;
use crate::publish::outlet::{FrameResult, Outlet, Stop, Stopping, TrackingUpdate};
use crate::sys::lock::lock;
use crate::track::events::EventKind;

/// Time the task is given beyond the flush bound to notice it and count what is left.
const STOP_MARGIN: Duration = Duration::from_secs(1);

/// One webhook; see the module doc.
pub struct WebhookOutlet {
    name: String,
    kinds: Vec<EventKind>,
    /// The class ids of `labels`; empty: every class.
    classes: Vec<usize>,
    /// Empty: every camera.
    cameras: Vec<String>,
    labels: Arc<Labels>,
    queue: Arc<Queue>,
    flush: Duration,
    task: std::sync::Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for WebhookOutlet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookOutlet").field("name", &self.name).field("queue", &self.queue.stats()).finish()
    }
}

impl WebhookOutlet {
    /// Starts the webhook's task on the current tokio runtime: it posts through `client` what the
    /// outlet queues. `labels` names the events' classes (and resolves `config.labels`: the start
    /// checks refused a label the file lacks, so none is missing here).
    pub fn start(config: &WebhookConfig, client: Client, labels: Arc<Labels>) -> WebhookOutlet {
        let queue = Arc::new(Queue::new(&config.name, config.queue));
        let policy = RetryPolicy {
            retries: config.retries,
            min: Duration::from_millis(config.retry_min_ms),
            max: Duration::from_millis(config.retry_max_ms),
        };
        let task = tokio::spawn(deliver(queue.clone(), client, policy));
        let kinds = config
            .events
            .iter()
            .map(|kind| match kind {
                EventKindChoice::Start => EventKind::Start,
                EventKindChoice::Update => EventKind::Update,
                EventKindChoice::End => EventKind::End,
            })
            .collect();
        WebhookOutlet {
            name: config.name.clone(),
            kinds,
            classes: config.labels.iter().filter_map(|label| labels.id_of(label)).collect(),
            cameras: config.cameras.clone(),
            labels,
            queue,
            flush: Duration::from_millis(config.shutdown_flush_ms),
            task: std::sync::Mutex::new(Some(task)),
        }
    }

    fn takes(&self, camera: &str, event: &ObjectEvent) -> bool {
        self.kinds.contains(&event.kind)
            && (self.classes.is_empty() || self.classes.contains(&event.class_id))
            && (self.cameras.is_empty() || self.cameras.iter().any(|name| name == camera))
    }

    fn events(&self, camera: &str, events: &[ObjectEvent]) {
        for event in events.iter().filter(|event| self.takes(camera, event)) {
            let message = EventMessage::new(camera, event, &self.labels);
            self.queue.push(Bytes::from(message.to_json()));
        }
    }
}

impl Outlet for WebhookOutlet {
    fn name(&self) -> &str {
        &self.name
    }

    fn frame(&self, frame: &FrameResult<'_>) {
        self.events(frame.camera, frame.tracking.events);
    }

    fn tracking(&self, camera: &str, update: &TrackingUpdate<'_>) {
        self.events(camera, update.events);
    }

    /// The queue, what the receiver took and what was dropped; retries are the webhook's own.
    fn figures(&self) -> Option<OutletFigures> {
        let stats = self.queue.stats();
        let metrics = vec![
            figures::queued_messages(stats.queued),
            figures::delivered_messages(stats.delivered),
            figures::dropped_messages(stats.dropped),
            Metric::counter("webhook_retries", "Delivery attempts after a failed one.", None, stats.retries),
        ];
        Some(OutletFigures { connected: None, report: OutletFigures::report_of(&stats), metrics })
    }

    /// Takes nothing more, delivers what is queued within `shutdown_flush_ms`, then drops (and
    /// counts) the rest. After a failed start nothing was queued: it ends at once.
    fn stop(self: Arc<Self>, _why: Stop) -> Stopping {
        Box::pin(async move {
            self.queue.close(self.flush);
            let Some(task) = lock(&self.task).take() else { return };
            let abort = task.abort_handle();
            if tokio::time::timeout(self.flush + STOP_MARGIN, task).await.is_err() {
                abort.abort();
                log::error!("webhook {}: its task did not end within the flush bound; stopped", self.name);
            }
            let stats = self.queue.stats();
            log::info!(
                "webhook {}: stopped; {} event(s) delivered, {} dropped since start",
                self.name,
                stats.delivered,
                stats.dropped
            );
        })
    }
}
