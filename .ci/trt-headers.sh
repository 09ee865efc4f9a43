#!/usr/bin/env bash
# TensorRT headers for compiling the C++ shim (src/backend/trt/shim.cpp) without TensorRT installed.
#
#   .ci/trt-headers.sh [11]       print the include directory of TensorRT 11.4 (fetched from crates.io):
#                                 what TENSORRT_INCLUDE_DIR takes
#   .ci/trt-headers.sh VERSION    the same for a committed version: 8.5.3, 8.6.1, 10.3.0, 10.13.0,
#                                 10.16.0 (also `10`), 11.1.0
#   .ci/trt-headers.sh --check    the compile matrix: compile the shim object alone against every
#                                 TensorRT a JetPack ships and fail on the first problem (below)
#
# Headers: vendor/tensorrt-headers/{8.5.3,8.6.1,10.3.0,10.13.0,10.16.0,11.1.0} are committed (Apache-2.0,
# NOTICE.md there: JetPack 5.1 ships 8.5, 6.0 ships 8.6, 6.1/6.2 ship 10.3, 7.0 ships 10.13, later
# JetPack 7 releases newer 10.x); 11.4
# ships inside the crates.io package `trtx-sys` 0.9.1 (TensorRT-Headers/TRT-Enterprise-11.4), which is
# only *fetched* into a throwaway cargo project under $CARGO_TARGET_DIR (its build script needs
# TensorRT and is never run).
#
# For each version --check runs:
#   1. g++ -std=c++17 -Wall -Wextra -Werror on the shim (warnings inside TensorRT's headers excepted);
#   2. nm -uC: no undefined TensorRT symbol (nvinfer1::, nvonnxparser::, the factories): TensorRT is
#      dlopened, so only dlsym may provide them;
#   3. the object defines every `jd_*` function that src/backend/trt/ffi.rs declares (the Rust side is the
#      same for every version, so this is its link check), and links into a shared object with
#      --no-undefined against libstdc++ and libdl only.
# Why the shim object alone is enough: the Rust side (src/backend/trt/ffi.rs and everything above it) never
# sees a TensorRT header: it talks to the shim through its own extern "C" structs, whose layout is
# defined in shim.cpp, not by TensorRT. What changes with the header version is only the shim's
# object code, which this checks; `cargo clippy --features tensorrt` (CI's clippy-all-features phase)
# compiles and links the crate once, with 11.4.
#
# Use: TENSORRT_INCLUDE_DIR="$(.ci/trt-headers.sh)" cargo clippy --features tensorrt
set -euo pipefail

repo_root="$(cd "$(dirname "$0")/.." && pwd)"
target_dir="${CARGO_TARGET_DIR:-$repo_root/target}"
cargo_home="${CARGO_HOME:-$HOME/.cargo}"
committed="$repo_root/vendor/tensorrt-headers"

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

# The jd_* functions the Rust side declares, one per line, sorted.
declared_functions() {
    grep -oE 'pub fn jd_[a-z0-9_]+' "$repo_root/src/backend/trt/ffi.rs" | sed 's/^pub fn //' | sort -u
}

# check_shim <label> <include dir>
check_shim() {
    local label="$1" include="$2" scratch
    scratch="$(mktemp -d)"
    local object="$scratch/shim.o"
    # -isystem: warnings inside TensorRT's headers are not ours; the shim itself must be clean.
    if ! g++ -std=c++17 -O2 -fPIC -Wall -Wextra -Werror -c \
        -isystem "$include" -idirafter "$repo_root/src/backend/trt/cuda_stub" \
        "$repo_root/src/backend/trt/shim.cpp" -o "$object"; then
        echo "trt-headers: TensorRT $label: the shim does not compile" >&2
        rm -rf "$scratch"
        return 1
    fi
    local undefined
    undefined="$(nm -u -C "$object" | grep -iE 'nvinfer|nvonnxparser|createInfer|createNvOnnx|getInferLib|initLibNvInferPlugins|getPluginRegistry|getBuilderPluginRegistry|getLogger' || true)"
    if [[ -n "$undefined" ]]; then
        echo "trt-headers: TensorRT $label: the shim references TensorRT symbols that only dlsym may provide:" >&2
        echo "$undefined" >&2
        rm -rf "$scratch"
        return 1
    fi
    local missing
    missing="$(comm -23 <(declared_functions) <(nm --defined-only "$object" | awk '{print $3}' | grep '^jd_' | sort -u))"
    if [[ -n "$missing" ]]; then
        echo "trt-headers: TensorRT $label: src/backend/trt/ffi.rs declares functions the shim does not define:" >&2
        echo "$missing" >&2
        rm -rf "$scratch"
        return 1
    fi
    if ! g++ -shared -Wl,--no-undefined -o "$scratch/shim.so" "$object" -ldl; then
        echo "trt-headers: TensorRT $label: the shim does not link on its own (libstdc++ and libdl only)" >&2
        rm -rf "$scratch"
        return 1
    fi
    rm -rf "$scratch"
    echo "shim OK against TensorRT $label ($include): compiles clean, no undefined TensorRT symbol, links"
}

check_matrix() {
    local version failed=0
    for version in 8.5.3 8.6.1 10.3.0 10.13.0 10.16.0 11.1.0; do
        check_shim "$version" "$committed/$version" || failed=1
    done
    check_shim 11.4 "$(headers_dir 0.9.1 TRT-Enterprise-11.4)" || failed=1
    return "$failed"
}

case "${1:-11}" in
    11) headers_dir 0.9.1 TRT-Enterprise-11.4 ;;
    10) echo "$committed/10.16.0" ;;
    --check) check_matrix ;;
    *)
        if [[ "$1" =~ ^[0-9.]+$ && -f "$committed/$1/NvInfer.h" ]]; then
            echo "$committed/$1"
        else
            echo "usage: $0 [11|10|8.5.3|8.6.1|10.3.0|10.13.0|10.16.0|11.1.0|--check]" >&2
            exit 2
        fi
        ;;
esac
