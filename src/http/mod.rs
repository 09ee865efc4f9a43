//! The HTTP stage: the built-in page, the JSON API and Prometheus `/metrics`, on the daemon's tokio
//! runtime (axum, HTTP/1).
//!
//! Owns: the listener (`[http] listen`) and the server's start and stop ([`lifecycle`]) and its
//! connections, bounded in number and time ([`connections`]; which one makes room for a new
//! client: [`admission`]), the names it answers to ([`hosts`]), the token (`[http] token_file`,
//! read once at start, never logged: [`token`]), what the handlers share ([`state`]), the routes
//! ([`server`]), the handlers ([`api`], [`clips`] for event clips, [`event_stream`] for the
//! events pushed as they happen, [`event_entry`] for an event's JSON and picture, [`live`] for
//! live video and its boxes, [`motion`] for the motion the cameras' gates see, and what the streamed
//! ones answer alike, [`streamed`]), the live pictures
//! ([`picture`]), the metrics ([`metrics`]) in both text formats ([`exposition`]), the page's
//! assets compiled into the binary ([`page`]: no files to install, no CDN) and its errors
//! ([`error`]). It reads the daemon only through the live view
//! (`crate::publish::live::LiveView`), the controls (`crate::controls::Controls`), the
//! recorder's index (`crate::record::Recorder`), the cameras' live feeds
//! (`crate::watch::hub::WatchHub`) and motion gates (`crate::infer::gating::MotionGates`), and
//! changes only the zones (with the motion masks) and the controls; a
//! zone change is saved to the zones file and applied by the daemon's loop, which it asks through a
//! channel ([`ZonesChange`]) and whose answer it waits for, so a saved zone is live when the
//! request returns, and a change that comes once the loop has stopped is saved nowhere; a control
//! change is applied by the daemon's loop, which the controls wake. Must not: touch a frame slot,
//! hold a lock the pipeline waits on (it copies `Arc`s out of the view), or let a request path
//! reach the file system beyond the one zones file and the clips the recorder's index lists.

pub mod admission;
pub mod api;
pub mod clips;
pub mod connections;
pub mod error;
pub mod event_entry;
pub mod event_stream;
pub mod exposition;
pub mod hosts;
pub mod lifecycle;
pub mod live;
pub mod metrics;
pub mod motion;
pub mod page;
pub mod picture;
pub mod server;
pub mod state;
pub mod streamed;
pub mod token;

pub use error::HttpError;
pub use lifecycle::{bind, BoundListener, HttpServer, STOP_GRACE};
pub use state::{HttpState, ZonesChange};
pub use token::Token;
