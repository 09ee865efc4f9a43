#!/usr/bin/env python3
"""Inference per frame of the daemon's CPU engines against ONNX Runtime's own Python API (issue 23).

Same machine, same run, interleaved rounds (the order rotates every round, so a loaded machine hurts
every engine alike), the bundled SSD MobileNet v2 on a 300x300 u8 input:
- daemon-onnxruntime: `jetson-detectd bench` with device.cpu_engine = "onnxruntime" and the library
  of the `onnxruntime` Python package itself (its onnxruntime/capi/ folder), so both sides run the
  very same ONNX Runtime build; `pipeline.infer` (the session's run and the outputs' conversion);
- daemon-rten: the same with device.cpu_engine = "rten";
- python-onnxruntime: `InferenceSession.run` with intra_op_num_threads = N (other options at their
  defaults, as a Python user has them) on dog.jpg resized to 300x300 (Pillow) or, without Pillow,
  a fixed pseudo-random image (this model's work does not depend on the pixels).
Each daemon run is one `bench` process (model load, warm-up, then --iters timed frames); one worker,
device.cpu_threads = N. Prints median ms (median of the round medians, [min..max of round medians],
and the fastest single run) and daemon/python ratios of the medians. With --cameras, also `bench --cameras N` with each daemon engine at
device.cpu_threads = --camera-threads (fps of all cameras together).

    cargo build --release
    python3 benches/onnxruntime_vs_daemon.py --threads 1,2 --rounds 5
    python3 benches/onnxruntime_vs_daemon.py --daemon target/release/jetson-detectd --cameras 1,4,8
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MODEL = REPO / "models" / "ssd_mobilenet_v2_coco_prenms_fp32.onnx"
IMAGE = REPO / "models" / "samples" / "dog.jpg"


def use_repo(repo):
    """Reads the model and image from another checkout (the script copied elsewhere)."""
    global MODEL, IMAGE
    MODEL = repo / "models" / "ssd_mobilenet_v2_coco_prenms_fp32.onnx"
    IMAGE = repo / "models" / "samples" / "dog.jpg"


def default_daemon():
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    return target / "release" / "jetson-detectd"


def python_library():
    import onnxruntime

    capi = Path(onnxruntime.__file__).parent / "capi"
    found = sorted(glob.glob(str(capi / "libonnxruntime.so*")))
    if not found:
        sys.exit(f"no libonnxruntime.so* in {capi}")
    return Path(found[-1]), onnxruntime.__version__


def write_config(work, engine, threads, library):
    path = work / f"{engine}-{threads}.toml"
    lines = ["[device]", f'cpu_engine = "{engine}"', f"cpu_threads = {threads}", "cpu_workers = 1"]
    if engine == "onnxruntime":
        lines.append(f'onnxruntime_library = "{library}"')
    path.write_text("\n".join(lines) + "\n")
    return path


def daemon_bench(daemon, config, args, cameras=None):
    command = [str(daemon), "bench", "--config", str(config), "--image", str(IMAGE),
               "--iterations", str(args.iters), "--warmup", str(args.warmup)]
    if cameras:
        command += ["--cameras", str(cameras)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        return {"error": result.stderr.strip()[-400:]}
    report = json.loads(result.stdout)["pipeline"]
    out = {
        "engine": report["backend"].get("engine"),
        "median_ms": report["infer"]["median_ms"],
        "min_ms": report["infer"]["min_ms"],
        "preprocess_ms": report["preprocess"]["median_ms"],
    }
    if cameras:
        out["fps_total"] = report.get("fps_total")
        out["workers"] = report.get("cameras", {}).get("workers")
    return out


def python_input():
    import numpy as np

    try:
        from PIL import Image

        image = Image.open(IMAGE).convert("RGB").resize((300, 300), Image.BILINEAR)
        return np.asarray(image, dtype=np.uint8).reshape(1, 300, 300, 3), "dog.jpg (Pillow)"
    except ImportError:
        rng = np.random.default_rng(23)
        return rng.integers(0, 256, size=(1, 300, 300, 3), dtype=np.uint8), "pseudo-random"


def python_run(inputs, threads, args):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(str(MODEL), options, providers=["CPUExecutionProvider"])
    feed = {session.get_inputs()[0].name: inputs}
    times = []
    for i in range(args.warmup + args.iters):
        started = time.perf_counter()
        session.run(None, feed)
        if i >= args.warmup:
            times.append((time.perf_counter() - started) * 1e3)
    times.sort()
    return {"engine": f"onnxruntime {ort.__version__} (Python)", "median_ms": round(times[len(times) // 2], 2),
            "min_ms": round(times[0], 2)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--daemon", type=Path, default=default_daemon())
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--cameras", default="", help="e.g. 1,4,8: also bench --cameras N per daemon engine")
    parser.add_argument("--camera-threads", type=int, default=os.cpu_count())
    parser.add_argument("--repo", type=Path, help="checkout whose models/ to use (default: this script's)")
    args = parser.parse_args()
    if args.repo:
        use_repo(args.repo.resolve())
    library, version = python_library()
    inputs, input_name = python_input()
    work = Path(tempfile.mkdtemp(prefix="ort-vs-daemon-"))
    thread_counts = [int(t) for t in args.threads.split(",") if t]
    names = ["daemon-onnxruntime", "python-onnxruntime", "daemon-rten"]
    rounds = {}
    for round_index in range(args.rounds):
        for threads in thread_counts:
            shift = round_index % len(names)
            for name in names[shift:] + names[:shift]:
                if name == "python-onnxruntime":
                    report = python_run(inputs, threads, args)
                else:
                    engine = name.split("-", 1)[1]
                    report = daemon_bench(args.daemon, write_config(work, engine, threads, library), args)
                report.update(name=name, threads=threads, round=round_index)
                print(json.dumps(report), file=sys.stderr, flush=True)
                rounds.setdefault((name, threads), []).append(report)

    print(f"\nSSD MobileNet v2 300x300 u8, ONNX Runtime {version} from {library}; python input {input_name};"
          f" {args.rounds} rounds x {args.iters} runs; load avg now {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs")
    print("| engine | " + " | ".join(f"{t} thread{'s' if t > 1 else ''} (ms)" for t in thread_counts) + " |")
    print("|---|" + "---|" * len(thread_counts))
    medians = {}
    for name in names:
        cells = []
        for threads in thread_counts:
            values = [r["median_ms"] for r in rounds.get((name, threads), []) if "median_ms" in r]
            if not values:
                cells.append("error")
                continue
            medians[(name, threads)] = statistics.median(values)
            fastest = min(r["min_ms"] for r in rounds[(name, threads)] if "min_ms" in r)
            cells.append(f"{medians[(name, threads)]:.1f} [{min(values):.1f}..{max(values):.1f}] min {fastest:.1f}")
        print(f"| {name} | " + " | ".join(cells) + " |")
    for name in ["daemon-onnxruntime", "daemon-rten"]:
        ratios = [f"{medians[(name, t)] / medians[('python-onnxruntime', t)]:.2f}x" if (name, t) in medians
                  and ("python-onnxruntime", t) in medians else "-" for t in thread_counts]
        print(f"| {name} / python-onnxruntime | " + " | ".join(ratios) + " |")

    cameras = [int(c) for c in args.cameras.split(",") if c]
    if cameras:
        print(f"\nbench --cameras N, device.cpu_threads = {args.camera_threads}, default workers:")
        print("| engine | " + " | ".join(f"{n} camera{'s' if n > 1 else ''} fps (workers)" for n in cameras) + " |")
        print("|---|" + "---|" * len(cameras))
        for engine in ["onnxruntime", "rten"]:
            config = work / f"{engine}-cameras.toml"
            lines = ["[device]", f'cpu_engine = "{engine}"', f"cpu_threads = {args.camera_threads}"]
            if engine == "onnxruntime":
                lines.append(f'onnxruntime_library = "{library}"')
            config.write_text("\n".join(lines) + "\n")
            cells = []
            for n in cameras:
                report = daemon_bench(args.daemon, config, args, cameras=n)
                print(json.dumps({"engine": engine, "cameras": n, **report}), file=sys.stderr, flush=True)
                cells.append("error" if "error" in report else f"{report['fps_total']:.1f} ({report['workers']})")
            print(f"| {engine} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
