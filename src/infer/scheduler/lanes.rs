//! The models the workers run: one lane per detector a camera runs (lane 0: `[model]`, unless no
//! camera runs it; others: the `[models.<name>]` detectors cameras name), each with its backend,
//! its decode parameters (and their generation, for reloads), the cameras it serves and its class
//! ids in the shared label list.
//!
//! Owns: [`ModelLane`]. Must not: hold sessions (a worker's are its own, `super::model_sessions`).

use std::sync::{Arc, Mutex};

use crate::backend::Backend;
use crate::decode::DecodeParams;
use crate::detection::Detection;
use crate::sys::lock::lock;

/// A model the workers run: its backend (loaded from its `crate::model::ModelSpec`), its decode
/// parameters, the cameras it serves and its class ids in the shared label list. Each worker
/// keeps a session for every lane (`super::model_sessions`).
pub struct ModelLane {
    pub backend: Arc<dyn Backend>,
    /// Decode parameters and their generation: a worker adopts them when the generation changes.
    params: Mutex<(u64, DecodeParams)>,
    /// The shared label list's id of each of this model's class ids (`None`: the ids are the
    /// shared list's, as for `[model]`). A detection whose id has no entry is dropped: its label
    /// file does not name it.
    class_ids: Option<Vec<usize>>,
    /// The cameras it serves (lane 0 also serves every camera no lane names).
    cameras: Vec<String>,
    /// The `[models.<name>]` it runs (`None`: `[model]`).
    name: Option<String>,
}

impl ModelLane {
    /// A lane whose class ids are the shared list's.
    pub fn new(backend: Arc<dyn Backend>, params: DecodeParams) -> ModelLane {
        ModelLane { backend, params: Mutex::new((0, params)), class_ids: None, cameras: Vec::new(), name: None }
    }

    /// The lane of `[models.<name>]` for `cameras`, whose class id `i` is the shared list's
    /// `class_ids[i]` ([`crate::detection::Labels::absorb`]).
    pub fn renamed(
        name: &str,
        backend: Arc<dyn Backend>,
        params: DecodeParams,
        class_ids: Vec<usize>,
        cameras: Vec<String>,
    ) -> ModelLane {
        let params = Mutex::new((0, params));
        ModelLane { backend, params, class_ids: Some(class_ids), cameras, name: Some(name.to_string()) }
    }

    /// The `[models.<name>]` it runs (`None`: `[model]`).
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// Whether it serves camera `name` by name (lane 0 also serves every camera no lane names).
    pub(super) fn serves(&self, name: &str) -> bool {
        self.cameras.iter().any(|camera| camera == name)
    }

    /// New decode parameters, a new generation for the workers to adopt.
    pub(super) fn reload(&self, params: DecodeParams) {
        let mut current = lock(&self.params);
        *current = (current.0 + 1, params);
    }

    /// The decode parameters and their generation.
    pub(super) fn params(&self) -> (u64, DecodeParams) {
        lock(&self.params).clone()
    }

    /// The decode parameters, when their generation is not `seen`.
    pub(super) fn params_since(&self, seen: u64) -> Option<(u64, DecodeParams)> {
        let params = lock(&self.params);
        (params.0 != seen).then(|| params.clone())
    }

    /// Gives `detections` the shared label list's class ids, dropping those its label file does
    /// not name.
    pub(super) fn to_shared_ids(&self, detections: &mut Vec<Detection>) {
        let Some(class_ids) = &self.class_ids else { return };
        detections.retain_mut(|detection| match class_ids.get(detection.class_id) {
            Some(&shared) => {
                detection.class_id = shared;
                true
            }
            None => false,
        });
    }
}
