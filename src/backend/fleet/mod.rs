//! Engines shared by a fleet of devices of one kind, so that each engine is built once: engine
//! packs ([`pack`]: the signed file, its import into the engine cache and its export) and engine
//! stores ([`store`]: packs on a registry or an object store, and the build lease).
//!
//! Owns: what crosses between devices and the trust it needs. Pure Rust and always compiled, so
//! that all of it is tested without TensorRT. Must not: build or run engines (`super::trt`), or
//! parse the config (callers hand in its typed `[engine.store]`; `store` takes the parsed
//! `engine.store.url`).

pub mod engine_source;
pub mod pack;
pub mod store;
