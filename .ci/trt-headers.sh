#!/usr/bin/env bash
# Fetches TensorRT headers from crates.io and prints their include directory.
#
#   .ci/trt-headers.sh [11|10]    print the TensorRT 11.4 (default) or 10.16 include directory
#   .ci/trt-headers.sh --check    compile src/trt/shim.cpp against both with -Wall -Wextra -Werror
#                                 and fail if the object has any undefined TensorRT symbol
#
# The headers (Apache-2.0) ship inside the `trtx-sys` crate: 0.9.1 has TensorRT-Headers/
# TRT-Enterprise-11.4, 0.5.0 has TRT-Enterprise-10.16. The crate is only *fetched* into a
# throwaway cargo project under $CARGO_TARGET_DIR (its build script needs TensorRT and is never
# run). No TensorRT 8.6 headers are published on a registry, so 8.6 is not checked here.
#
# Use: TENSORRT_INCLUDE_DIR="$(.ci/trt-headers.sh)" cargo clippy --features tensorrt
set -euo pipefail

repo_root="$(cd "$(dirname "$0")/.." && pwd)"
target_dir="${CARGO_TARGET_DIR:-$repo_root/target}"
cargo_home="${CARGO_HOME:-$HOME/.cargo}"

# headers_dir <trtx-sys version> <folder>: fetches the crate if needed, prints the folder's path.
headers_dir() {
    local version="$1" folder="$2"
    local found
    found="$(ls -d "$cargo_home"/registry/src/*/"trtx-sys-$version"*/TensorRT-Headers/"$folder" 2>/dev/null | head -n 1 || true)"
    if [[ -z "$found" ]]; then
        local project="$target_dir/trt-headers/trtx-sys-$version"
        mkdir -p "$project/src"
        cat > "$project/Cargo.toml" <<TOML
[package]
name = "trt-headers-fetch"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
trtx-sys = "=$version"
TOML
        : > "$project/src/lib.rs"
        # Only the host's dependencies: nothing for other platforms needs to be downloaded.
        (cd "$project" && cargo fetch --quiet --target "$(rustc -vV | sed -n 's/^host: //p')") >&2
        found="$(ls -d "$cargo_home"/registry/src/*/"trtx-sys-$version"*/TensorRT-Headers/"$folder" 2>/dev/null | head -n 1 || true)"
    fi
    if [[ -z "$found" || ! -f "$found/NvInfer.h" ]]; then
        echo "trt-headers: trtx-sys $version has no TensorRT-Headers/$folder/NvInfer.h" >&2
        exit 1
    fi
    echo "$found"
}

check_shim() {
    local include="$1" object
    object="$(mktemp --suffix=.o)"
    # -isystem: warnings inside TensorRT's headers are not ours; the shim itself must be clean.
    g++ -std=c++17 -O2 -fPIC -Wall -Wextra -Werror -c \
        -isystem "$include" -idirafter "$repo_root/src/trt/cuda_stub" \
        "$repo_root/src/trt/shim.cpp" -o "$object"
    local undefined
    undefined="$(nm -u -C "$object" | grep -E 'nvinfer1|nvonnxparser|createInfer|createNvOnnx|getInferLib' || true)"
    rm -f "$object"
    if [[ -n "$undefined" ]]; then
        echo "trt-headers: the shim references TensorRT symbols that only dlsym may provide:" >&2
        echo "$undefined" >&2
        exit 1
    fi
    echo "shim OK against $include (no undefined TensorRT symbols)"
}

case "${1:-11}" in
    11) headers_dir 0.9.1 TRT-Enterprise-11.4 ;;
    10) headers_dir 0.5.0 TRT-Enterprise-10.16 ;;
    --check)
        check_shim "$(headers_dir 0.9.1 TRT-Enterprise-11.4)"
        check_shim "$(headers_dir 0.5.0 TRT-Enterprise-10.16)"
        ;;
    *)
        echo "usage: $0 [11|10|--check]" >&2
        exit 2
        ;;
esac
