//! Raw declarations of the `extern "C"` surface of `shim.cpp` (kept in the same order).
//!
//! Owns: the C ABI types and function signatures. Must not: contain logic; everything safe lives in
//! [`super::runtime`]. Pointers to `Jd*` handles are only ever created and freed by the shim.

use std::ffi::{c_char, c_void};

pub const JD_MAX_DIMS: usize = 8;

pub const JD_PHASE_START: i32 = 0;
pub const JD_STEP_COMPLETE: i32 = 1;
pub const JD_PHASE_FINISH: i32 = 2;

pub const JD_PRECISION_FP32: i32 = 0;
pub const JD_PRECISION_FP16: i32 = 1;
pub const JD_PRECISION_INT8: i32 = 2;

/// Called by TensorRT's logger, from any thread.
pub type JdLogFn = extern "C" fn(user: *mut c_void, severity: i32, message: *const c_char);
/// Build progress (TensorRT 10+); return 0 to cancel the build.
pub type JdProgressFn =
    extern "C" fn(user: *mut c_void, event: i32, phase: *const c_char, parent: *const c_char, steps: i32) -> i32;

#[repr(C)]
pub struct JdBuildOptions {
    pub precision: i32,
    pub dla_core: i32,
    pub optimization_level: i32,
    pub profile_nb_dims: i32,
    pub profile_count: i32,
    pub reserved: i32,
    pub workspace_bytes: u64,
    pub profile_input: *const c_char,
    pub profile_min: [i64; JD_MAX_DIMS],
    pub profile_opt: [i64; JD_MAX_DIMS],
    pub profile_max: [i64; JD_MAX_DIMS],
}

#[repr(C)]
pub struct JdBlob {
    pub data: *const c_void,
    pub size: u64,
    pub owner: *mut c_void,
}

impl JdBlob {
    pub const EMPTY: JdBlob = JdBlob { data: std::ptr::null(), size: 0, owner: std::ptr::null_mut() };
}

#[repr(C)]
pub struct JdBuildResult {
    pub engine: JdBlob,
    pub timing_cache: JdBlob,
    pub timing_cache_rejected: i32,
    pub profiles: i32,
    pub timing_cache_error: [c_char; 512],
}

impl JdBuildResult {
    pub const EMPTY: JdBuildResult = JdBuildResult {
        engine: JdBlob::EMPTY,
        timing_cache: JdBlob::EMPTY,
        timing_cache_rejected: 0,
        profiles: 0,
        timing_cache_error: [0; 512],
    };
}

#[repr(C)]
pub struct JdTensorInfo {
    pub name: *const c_char,
    pub mode: i32,
    pub dtype: i32,
    pub nb_dims: i32,
    pub format: i32,
    pub dims: [i64; JD_MAX_DIMS],
}

/// Opaque handles.
#[repr(C)]
pub struct JdTrt {
    _private: [u8; 0],
}
#[repr(C)]
pub struct JdEngine {
    _private: [u8; 0],
}
#[repr(C)]
pub struct JdContext {
    _private: [u8; 0],
}

extern "C" {
    #[cfg(test)]
    pub fn jd_struct_sizes(out: *mut u64);
    pub fn jd_header_version(out: *mut i32);
    pub fn jd_library_name() -> *const c_char;
    pub fn jd_load_library(version: *mut i32, err: *mut c_char, err_len: usize) -> i32;
    pub fn jd_plugin_library_name() -> *const c_char;
    pub fn jd_load_plugins(log: JdLogFn, log_user: *mut c_void, err: *mut c_char, err_len: usize) -> i32;
    pub fn jd_trt_open(
        log: JdLogFn,
        log_user: *mut c_void,
        out: *mut *mut JdTrt,
        err: *mut c_char,
        err_len: usize,
    ) -> i32;
    pub fn jd_trt_close(trt: *mut JdTrt);
    pub fn jd_blob_free(blob: *mut JdBlob);
    #[allow(clippy::too_many_arguments)]
    pub fn jd_build(
        trt: *mut JdTrt,
        options: *const JdBuildOptions,
        onnx: *const c_void,
        onnx_len: usize,
        onnx_path: *const c_char,
        timing_in: *const c_void,
        timing_in_len: usize,
        progress: Option<JdProgressFn>,
        progress_user: *mut c_void,
        result: *mut JdBuildResult,
        err: *mut c_char,
        err_len: usize,
    ) -> i32;
    pub fn jd_engine_load(
        trt: *mut JdTrt,
        data: *const c_void,
        len: usize,
        dla_core: i32,
        out: *mut *mut JdEngine,
        err: *mut c_char,
        err_len: usize,
    ) -> i32;
    pub fn jd_engine_free(engine: *mut JdEngine);
    pub fn jd_engine_nb_io(engine: *const JdEngine) -> i32;
    pub fn jd_engine_io(engine: *const JdEngine, index: i32, out: *mut JdTensorInfo) -> i32;
    pub fn jd_engine_nb_profiles(engine: *const JdEngine) -> i32;
    pub fn jd_engine_device_memory(engine: *const JdEngine) -> i64;
    pub fn jd_engine_profile_max_shape(
        engine: *const JdEngine,
        name: *const c_char,
        profile: i32,
        nb_dims: *mut i32,
        dims: *mut i64,
    ) -> i32;
    pub fn jd_context_create(engine: *mut JdEngine, out: *mut *mut JdContext, err: *mut c_char, err_len: usize) -> i32;
    pub fn jd_context_free(context: *mut JdContext);
    pub fn jd_context_set_device_memory(context: *mut JdContext, memory: *mut c_void, size: i64);
    pub fn jd_context_set_profile(
        context: *mut JdContext,
        index: i32,
        stream: *mut c_void,
        err: *mut c_char,
        err_len: usize,
    ) -> i32;
    pub fn jd_context_set_input_shape(
        context: *mut JdContext,
        name: *const c_char,
        nb_dims: i32,
        dims: *const i64,
        err: *mut c_char,
        err_len: usize,
    ) -> i32;
    pub fn jd_context_tensor_shape(
        context: *const JdContext,
        name: *const c_char,
        nb_dims: *mut i32,
        dims: *mut i64,
    ) -> i32;
    pub fn jd_context_set_tensor_address(
        context: *mut JdContext,
        name: *const c_char,
        address: *mut c_void,
        err: *mut c_char,
        err_len: usize,
    ) -> i32;
    pub fn jd_context_enqueue(context: *mut JdContext, stream: *mut c_void, err: *mut c_char, err_len: usize) -> i32;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn struct_layouts_match_the_shim() {
        let mut sizes = [0u64; 4];
        // SAFETY: writes exactly four u64 into `sizes`.
        unsafe { jd_struct_sizes(sizes.as_mut_ptr()) };
        let rust = [
            std::mem::size_of::<JdBuildOptions>(),
            std::mem::size_of::<JdBlob>(),
            std::mem::size_of::<JdBuildResult>(),
            std::mem::size_of::<JdTensorInfo>(),
        ]
        .map(|size| size as u64);
        assert_eq!(sizes, rust, "jd_build_options, jd_blob, jd_build_result, jd_tensor_info");
    }
}
