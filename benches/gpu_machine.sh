#!/usr/bin/env bash
# The GPU tests and benchmarks of issue 11 in one run on a machine with an NVIDIA GPU and no Rust
# toolchain: the binaries are built elsewhere and handed over in BIN (default .devbin):
#   cargo build --release --features cuda,tensorrt --bin jetson-detectd
#   cargo test --features cuda,tensorrt --test it --no-run     # prints the test binary's path
#   mkdir -p .devbin && cp target/release/jetson-detectd .devbin/ && cp <test binary> .devbin/it
# It runs: the GPU tests (preprocessing against the CPU reference, batched rows, slot paths, the
# scratch arena), the same under compute-sanitizer memcheck, `bench --gpu` (kernels, the GPU path
# outside inference at 1080p), and `bench --cameras N` for N = 1, 2, 4, 8 on the CPU backend (and
# N = 8 once more with device.cpu_workers = 1, the default before it became one per 4 threads).
# Everything goes to OUT (default ./gpu-machine-out): log.txt, memcheck.log and bench.json (every
# benchmark's JSON by run name); a summary table is printed last. Not a test: nothing here asserts
# on time. memcheck leaves out the test that asks for a petabyte on purpose (the sanitizer counts
# the refused allocation as an API error).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bin=${BIN:-.devbin}
out=${OUT:-gpu-machine-out}
iterations=${ITERATIONS:-50}
mkdir -p "$out"
export JETSON_DETECTD_DATA_DIR=$PWD
image=models/samples/dog.jpg

runs=$(mktemp -d)
log=$out/log.txt
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv >"$log" 2>&1
echo "cpu cores: $(nproc)" >>"$log"

JETSON_DETECTD_GPU_TESTS=1 "$bin/it" gpu:: gpu_arena:: --test-threads=1 --nocapture >"$runs/tests" 2>&1
echo "gpu tests: exit $?" >>"$log"
JETSON_DETECTD_GPU_TESTS=1 timeout 420 compute-sanitizer --tool memcheck --error-exitcode 99 \
    "$bin/it" gpu:: gpu_arena:: --skip a_growth_that_cannot_be_allocated --test-threads=1 >"$out/memcheck.log" 2>&1
echo "memcheck: exit $?" >>"$log"

"$bin/jetson-detectd" bench --image "$image" --iterations "$iterations" --gpu >"$runs/gpu" 2>>"$log"
echo "bench --gpu: exit $?" >>"$log"
for cameras in 1 2 4 8; do
    "$bin/jetson-detectd" bench --image "$image" --iterations "$iterations" --cameras "$cameras" \
        >"$runs/cameras-$cameras" 2>>"$log"
    echo "bench --cameras $cameras: exit $?" >>"$log"
done
# The same 8 cameras on one CPU inference worker (device.cpu_workers = 1).
printf '[device]\ncpu_workers = 1\n' >"$runs/workers1.toml"
"$bin/jetson-detectd" bench --config "$runs/workers1.toml" --image "$image" --iterations "$iterations" --cameras 8 \
    >"$runs/cameras-8-workers-1" 2>>"$log"
echo "bench --cameras 8 with cpu_workers = 1: exit $?" >>"$log"
rm "$runs/workers1.toml"
cat "$runs/tests" >>"$log"

python3 - "$out" "$runs" <<'EOF'
import json, pathlib, re, sys
out, runs = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
bench = {}
for run in sorted(runs.iterdir()):
    if run.name != "tests":
        try:
            bench[run.name] = json.loads(run.read_text())
        except ValueError as error:
            bench[run.name] = {"error": str(error)}
(out / "bench.json").write_text(json.dumps(bench, indent=1))
log = (out / "log.txt").read_text(errors="replace")
for line in log.splitlines():
    if not line.startswith(("test ", "running", "scratch of", "thread", "note:", "stack")) and "SEED" not in line:
        print(line)
for line in log.splitlines():
    if line.startswith("test result") or "scratch of 4 contexts" in line or "FAILED" in line or "panicked" in line:
        print(line)
memcheck = (out / "memcheck.log").read_text(errors="replace")
print("memcheck:", (re.findall(r"ERROR SUMMARY: .*", memcheck) or ["no summary"])[-1])
def stage(s):
    return f"{s['median_ms']:.2f} (p90 {s['p90_ms']:.2f})"
try:
    gpu = bench["gpu"]
    for capture, path in gpu["gpu_path"].items():
        print(f"GPU path outside inference, frame {capture}, {path['frame']} -> {path['input']}, {path['slot']} slot, "
              f"ms median: source {stage(path['source'])}, preprocess {stage(path['preprocess'])}, "
              f"postprocess {stage(path['postprocess'])}, publish {stage(path['publish'])}, total {stage(path['total'])}")
    for name, report in gpu["gpu_preprocess"].items():
        print(f"kernel {name}: {json.dumps(report)[:600]}")
except KeyError as error:
    print("bench --gpu: no report:", error)
print("cameras | workers | fps_total | fps per camera | latency ms median (p90) | outside inference ms | batches")
for cameras in ("1", "2", "4", "8", "8-workers-1"):
    try:
        run = bench[f"cameras-{cameras}"]["pipeline"]["cameras"]
    except KeyError as error:
        print(cameras, "no report:", error)
        continue
    per = ", ".join(f"{f:.1f}" for f in run["fps_per_camera"])
    print(f"{cameras} | {run['workers']} | {run['fps_total']:.1f} | {per} | {stage(run['latency'])} | {stage(run['outside_inference'])} | {run['batch_sizes']}")
EOF
rm -rf "$runs"
