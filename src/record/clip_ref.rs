//! How an event names its clip: the clip's path in the record directory and the API route that
//! serves it. Must not: know whether the clip exists (the index does).

use crate::publish::object_event::ClipRef;

/// The reference to the clip at `path` (`<camera>/<file>`), with the API route that serves it.
pub fn clip_ref(path: &str) -> ClipRef {
    let url = match path.split_once('/') {
        Some((camera, file)) => clip_url(camera, file),
        None => String::new(),
    };
    ClipRef { path: path.to_owned(), url }
}

/// The route that serves clip `file` of `camera`.
pub fn clip_url(camera: &str, file: &str) -> String {
    format!("/api/cameras/{camera}/clips/{file}")
}
