//! Build script. Default builds do nothing here; each part is gated on its cargo feature.

fn main() {
    if std::env::var_os("CARGO_FEATURE_TENSORRT").is_some() {
        #[cfg(feature = "tensorrt")]
        tensorrt::build_shim();
    }
}

/// Compiles `src/backend/trt/shim.cpp` against TensorRT *headers* only: the shim dlopens libnvinfer at run
/// time, so nothing here links TensorRT.
#[cfg(feature = "tensorrt")]
mod tensorrt {
    use std::env;
    use std::path::{Path, PathBuf};

    const SHIM: &str = "src/backend/trt/shim.cpp";
    /// Declares only `cudaStream_t` / `cudaEvent_t`; searched after every real include directory,
    /// so a CUDA toolkit, when installed, always wins.
    const CUDA_STUB_DIR: &str = "src/backend/trt/cuda_stub";

    pub fn build_shim() {
        for var in ["TENSORRT_INCLUDE_DIR", "CUDA_INCLUDE_DIR", "CUDA_PATH"] {
            println!("cargo:rerun-if-env-changed={var}");
        }
        println!("cargo:rerun-if-changed={SHIM}");
        println!("cargo:rerun-if-changed={CUDA_STUB_DIR}/cuda_runtime_api.h");

        let Some(tensorrt) = find_tensorrt_headers() else {
            panic!(
                "feature `tensorrt`: NvInfer.h not found. Set TENSORRT_INCLUDE_DIR to the directory holding \
                 NvInfer.h and NvOnnxParser.h (JetPack: /usr/include/aarch64-linux-gnu; CI: `.ci/trt-headers.sh`)."
            );
        };

        let mut build = cc::Build::new();
        build
            .cpp(true)
            .file(SHIM)
            .std("c++17")
            .warnings(true)
            .extra_warnings(true)
            .warnings_into_errors(true)
            // System include: warnings inside TensorRT's own headers are not ours to fix.
            .flag("-isystem")
            .flag(tensorrt.to_string_lossy().as_ref());
        if let Some(cuda) = find_cuda_headers() {
            build.flag("-isystem").flag(cuda.to_string_lossy().as_ref());
        }
        let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
        build.flag("-idirafter").flag(manifest_dir.join(CUDA_STUB_DIR).to_string_lossy().as_ref());
        build.compile("jetson_detectd_trt_shim");
        // dlopen/dlsym live in libdl before glibc 2.34 (JetPack 5 ships 2.31).
        println!("cargo:rustc-link-lib=dl");
    }

    fn has(dir: &Path, file: &str) -> bool {
        dir.join(file).is_file()
    }

    fn find_tensorrt_headers() -> Option<PathBuf> {
        if let Some(dir) = env::var_os("TENSORRT_INCLUDE_DIR") {
            let dir = PathBuf::from(dir);
            if !has(&dir, "NvInfer.h") {
                panic!("TENSORRT_INCLUDE_DIR={} has no NvInfer.h", dir.display());
            }
            return Some(dir);
        }
        // Debian/Ubuntu (JetPack) install TensorRT under the target's multiarch directory.
        let multiarch = match env::var("CARGO_CFG_TARGET_ARCH").as_deref() {
            Ok("aarch64") => "/usr/include/aarch64-linux-gnu",
            _ => "/usr/include/x86_64-linux-gnu",
        };
        [multiarch, "/usr/include"].into_iter().map(PathBuf::from).find(|dir| has(dir, "NvInfer.h"))
    }

    fn find_cuda_headers() -> Option<PathBuf> {
        let from_env = [
            env::var_os("CUDA_INCLUDE_DIR").map(PathBuf::from),
            env::var_os("CUDA_PATH").map(|p| PathBuf::from(p).join("include")),
        ];
        from_env
            .into_iter()
            .flatten()
            .chain([PathBuf::from("/usr/local/cuda/include")])
            .find(|dir| has(dir, "cuda_runtime_api.h"))
    }
}
