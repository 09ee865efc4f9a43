#!/usr/bin/env python3
"""CPU inference engines side by side on the bundled SSD MobileNet v2 (issue 13): tract-onnx and
rten (pure Rust, built here from crates.io) and onnxruntime (Python, when installed), same input
tensor, same thread counts, interleaved over several rounds so that a loaded machine hurts every
engine alike. Prints median inference ms (median over rounds of each round's median, with the
spread min..max of those round medians), model load ms, the largest output difference against
onnxruntime, stripped binary size and, with --build-times, a clean release build of each harness.
Also reports whether each engine loads a YOLOv8-style export with dynamic axes (needs the Python
`onnx` package to generate it; skipped otherwise).

    python3 benches/cpu_engines/run.py                      # 5 rounds, 1 and 2 threads
    python3 benches/cpu_engines/run.py --build-times        # also time clean builds (minutes)

Harness builds go to $CARGO_TARGET_DIR/cpu-engines/<engine> (default: target/cpu-engines/...).
"""
import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
MODEL = REPO / "models" / "ssd_mobilenet_v2_coco_prenms_fp32.onnx"
IMAGE = REPO / "models" / "samples" / "dog.jpg"
ENGINES = ["tract", "rten"]


def target_dir(engine):
    base = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    return base / "cpu-engines" / engine


def build(engine, clean):
    target = target_dir(engine)
    if clean and target.exists():
        subprocess.run(["rm", "-rf", str(target)], check=True)
    started = time.monotonic()
    subprocess.run(
        ["cargo", "build", "--quiet", "--release", "--features", engine],
        cwd=HERE,
        env={**os.environ, "CARGO_TARGET_DIR": str(target)},
        check=True,
    )
    binary = target / "release" / "cpu-engines-bench"
    return binary, time.monotonic() - started


def run_harness(binary, args):
    result = subprocess.run([str(binary), *args], capture_output=True, text=True)
    line = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    try:
        return json.loads(line)
    except json.JSONDecodeError:
        return {"error": (result.stderr or result.stdout).strip()[-400:]}


def read_f32(path):
    data = Path(path).read_bytes()
    return struct.unpack(f"<{len(data) // 4}f", data)


def ort_run(model, inputs, threads, warmup, iters):
    import numpy as np
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    started = time.perf_counter()
    session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    load_ms = (time.perf_counter() - started) * 1e3
    feed = {session.get_inputs()[0].name: inputs}
    times = []
    outputs = None
    cpu_started = 0.0
    for i in range(warmup + iters):
        if i == warmup:
            cpu_started = time.process_time()
        started = time.perf_counter()
        result = session.run(None, feed)
        if i >= warmup:
            times.append((time.perf_counter() - started) * 1e3)
        if outputs is None:
            outputs = np.concatenate([np.asarray(r, dtype=np.float32).ravel() for r in result])
    times.sort()
    return {
        "engine": "onnxruntime",
        "threads": threads,
        "load_ms": round(load_ms, 1),
        "median_ms": round(times[len(times) // 2], 2),
        "min_ms": round(times[0], 2),
        "cpu_ms": round((time.process_time() - cpu_started) * 1e3 / max(iters, 1), 2),
        "version": ort.__version__,
    }, outputs


def have(module):
    try:
        __import__(module)
        return True
    except ImportError:
        return False


def yolo_check(binaries, work, ort_available):
    """Generates a YOLOv8-style dynamic-axes model and runs each engine on a 640x640 input."""
    model = work / "yolov8_style_dynamic.onnx"
    subprocess.run([sys.executable, str(HERE / "make_yolov8_style.py"), str(model)], check=True)
    input_path = work / "yolo_input.bin"
    shape = "1,3,640,640"
    binary = next(iter(binaries.values()))
    subprocess.run(
        [str(binary), "--make-input", str(IMAGE), "--shape", shape, "--dtype", "f32", "--out", str(input_path)],
        check=True,
    )
    reference = None
    if ort_available:
        import numpy as np

        data = np.fromfile(input_path, dtype="<f4").reshape(1, 3, 640, 640)
        _, reference = ort_run(model, data, 1, 0, 1)
    results = {}
    for engine, binary in binaries.items():
        out = work / f"yolo_{engine}.bin"
        report = run_harness(
            binary,
            ["--model", str(model), "--input", str(input_path), "--shape", shape, "--dtype", "f32",
             "--threads", "1", "--warmup", "0", "--iters", "1", "--out", str(out)],
        )
        if "error" not in report and reference is not None:
            values = read_f32(out)
            report["max_abs_diff_vs_onnxruntime"] = float(max(abs(a - b) for a, b in zip(values, reference)))
        results[engine] = report
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iters", type=int, default=20, help="timed inferences per engine and round")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--build-times", action="store_true", help="clean release build of each harness, timed")
    parser.add_argument("--no-build", action="store_true", help="use the harness binaries already built")
    args = parser.parse_args()
    thread_counts = [int(t) for t in args.threads.split(",")]
    engines = args.engines.split(",")

    binaries, build_s = {}, {}
    for engine in engines:
        if args.no_build:
            binaries[engine] = target_dir(engine) / "release" / "cpu-engines-bench"
        else:
            binaries[engine], build_s[engine] = build(engine, args.build_times)
    ort_available = have("onnxruntime") and have("numpy")
    if not ort_available:
        print("onnxruntime or numpy not installed: onnxruntime skipped (pip install onnxruntime)", file=sys.stderr)

    work = Path(tempfile.mkdtemp(prefix="cpu-engines-"))
    input_path = work / "input.bin"
    shape = "1,300,300,3"
    subprocess.run(
        [str(binaries[engines[0]]), "--make-input", str(IMAGE), "--shape", shape, "--out", str(input_path)],
        check=True,
    )
    reference = None
    if ort_available:
        import numpy as np

        inputs = np.fromfile(input_path, dtype=np.uint8).reshape(1, 300, 300, 3)

    rounds = {}  # (engine, threads) -> list of reports
    names = engines + (["onnxruntime"] if ort_available else [])
    for round_index in range(args.rounds):
        for threads in thread_counts:
            # Rotate the order every round: no engine always runs first or last.
            shift = round_index % len(names)
            for engine in names[shift:] + names[:shift]:
                if engine == "onnxruntime":
                    report, outputs = ort_run(MODEL, inputs, threads, args.warmup, args.iters)
                    if reference is None:
                        reference = outputs
                else:
                    out = work / f"{engine}.bin"
                    report = run_harness(
                        binaries[engine],
                        ["--model", str(MODEL), "--input", str(input_path), "--shape", shape,
                         "--threads", str(threads), "--warmup", str(args.warmup), "--iters", str(args.iters),
                         "--out", str(out)],
                    )
                rounds.setdefault((engine, threads), []).append(report)
                print(json.dumps(report), file=sys.stderr)

    diffs = {}
    if reference is not None:
        for engine in engines:
            values = read_f32(work / f"{engine}.bin")
            diffs[engine] = float(max(abs(a - b) for a, b in zip(values, reference)))

    yolo = yolo_check(binaries, work, ort_available) if have("onnx") else None
    if yolo is None:
        print("python package onnx not installed: dynamic-axes check skipped (pip install onnx)", file=sys.stderr)

    summary = {"machine_load_1min": os.getloadavg()[0], "rounds": args.rounds, "iters": args.iters, "engines": {}}
    print(f"\nSSD MobileNet v2 300x300 u8, {args.rounds} rounds x {args.iters} runs, load avg now "
          f"{os.getloadavg()[0]:.1f}; median of round medians [min..max of round medians]")
    header = "| engine | " + " | ".join(f"{t} thread{'s' if t > 1 else ''} ms" for t in thread_counts)
    header += " | load ms | max |diff| vs ort | stripped binary | clean build |"
    print(header)
    print("|" + " --- |" * (header.count("|") - 1))
    for engine in names:
        cells, entry = [], {}
        for threads in thread_counts:
            reports = [r for r in rounds[(engine, threads)] if "median_ms" in r]
            if not reports:
                cells.append("error")
                continue
            medians = [r["median_ms"] for r in reports]
            median = statistics.median(medians)
            cpu = statistics.median(r["cpu_ms"] for r in reports)
            cells.append(f"{median:.1f} [{min(medians):.1f}..{max(medians):.1f}] cpu {cpu:.1f}")
            entry[f"threads_{threads}"] = {"median_ms": median, "round_medians": medians, "cpu_ms": cpu}
        loads = [r["load_ms"] for reports in (rounds[(engine, t)] for t in thread_counts) for r in reports
                 if "load_ms" in r]
        load = statistics.median(loads) if loads else float("nan")
        entry["load_ms"] = load
        size = f"{binaries[engine].stat().st_size / 1e6:.1f} MB" if engine in binaries else "-"
        build_cell = f"{build_s[engine]:.0f} s" if args.build_times and engine in build_s else "-"
        diff = f"{diffs[engine]:.1e}" if engine in diffs else "-"
        print(f"| {engine} | " + " | ".join(cells) + f" | {load:.0f} | {diff} | {size} | {build_cell} |")
        summary["engines"][engine] = entry
    if yolo is not None:
        print("\nYOLOv8-style export with dynamic axes (batch, height, width; symbolic value_info), 640x640:")
        for engine, report in yolo.items():
            if "error" in report:
                print(f"- {engine}: does not load or run: {report['error']}")
            else:
                diff = report.get("max_abs_diff_vs_onnxruntime")
                diff = f", max |diff| vs onnxruntime {diff:.1e}" if diff is not None else ""
                print(f"- {engine}: loads and runs, output {report['output_shapes']}{diff}")
        summary["yolov8_dynamic"] = yolo
    print("\n" + json.dumps(summary))


if __name__ == "__main__":
    main()
