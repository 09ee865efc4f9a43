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

With --streams N,... it runs the multi-stream comparison instead (issue 35): ONNX Runtime's Python
API as N sessions × T intra-op threads (one Python thread per session, each running the model back
to back for --seconds; T = 1, 2, 4, ... and cores / N, with N × T <= the cores), against each daemon's
`bench --cameras N` with default settings (ONNX Runtime from the same package, every other key at
its default: all cores, the default workers), in interleaved rounds. Also preprocessing: one worker
(`cpu_workers = 1`) at `cpu_threads` = T for T = 1, 2, 4, ... cores, the pipeline's `preprocess`
against `preprocess_alone` (the same preprocessing with nothing else running: its uncontended
time), in `bench`'s one-frame stages and in `bench --cameras 1` (one camera, between inferences as
the daemon runs them), and in each cameras run the workers' preprocessing per frame against the same preprocessing alone on
the threads it has there (one for an overlapping worker, which preprocesses beside an inference;
else the worker's share).
Prints one table per question (the ratios also round by round: each round's frames/s over
that round's best N-session rate, steadier than a ratio of two medians on a host whose speed moves
between rounds); --json writes every run. --daemon NAME=PATH names a binary (repeat it
to compare builds: "before" and "after" of a change); the median of every run's `preprocess_alone` at
T threads (all binaries: it is the same code) is the uncontended time preprocessing on T threads is
held against.

    cargo build --release
    python3 benches/onnxruntime_vs_daemon.py --threads 1,2 --rounds 5
    python3 benches/onnxruntime_vs_daemon.py --daemon target/release/jetson-detectd --cameras 1,4,8
    python3 benches/onnxruntime_vs_daemon.py --streams 1,2,4,8,16 --daemon before=old/jetson-detectd \
        --daemon after=target/release/jetson-detectd --rounds 2
    python3 benches/onnxruntime_vs_daemon.py --one-camera 8,12,16 --daemon plain=… --daemon overlapping=… \
        --rounds 3 --seconds 2 --camera-frames 400
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
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


def daemon_bench(daemon, config, args, cameras=None, iterations=None):
    command = [str(daemon), "bench", "--config", str(config), "--image", str(IMAGE),
               "--iterations", str(iterations or args.iters), "--warmup", str(args.warmup)]
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
        "preprocess_min_ms": report["preprocess"]["min_ms"],
    }
    if "preprocess_alone" in report:
        out["preprocess_alone_ms"] = report["preprocess_alone"]["median_ms"]
    if cameras:
        run = report.get("cameras", {})
        out["fps_total"] = report.get("fps_total")
        out["workers"] = run.get("workers")
        out["threads_per_worker"] = run.get("threads_per_worker")
        out["outside_inference_ms"] = run.get("outside_inference", {}).get("median_ms")
        out["overlapping"] = run.get("overlapping")
        if "preprocess" in run:
            out["cameras_preprocess_ms"] = run["preprocess"]["median_ms"]
        if "preprocess_alone" in run:
            out["cameras_preprocess_alone_ms"] = run["preprocess_alone"]["median_ms"]
        if "inference" in run:
            out["cameras_inference_ms"] = run["inference"]["median_ms"]
        if "between_frames" in run:
            out["between_frames_ms"] = run["between_frames"]["median_ms"]
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


def python_streams(inputs, sessions, threads, args):
    """Inferences per second of `sessions` ONNX Runtime sessions of `threads` intra-op threads each,
    one Python thread per session running the model back to back (`run` releases the GIL). Each
    thread warms up, waits for the others, then counts the inferences it completes in --seconds."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    made = [ort.InferenceSession(str(MODEL), options, providers=["CPUExecutionProvider"])
            for _ in range(sessions)]
    counts = [0] * sessions
    ready = threading.Barrier(sessions)

    def stream(index):
        session = made[index]
        feed = {session.get_inputs()[0].name: inputs}
        for _ in range(args.warmup):
            session.run(None, feed)
        ready.wait()
        deadline = time.perf_counter() + args.seconds
        while True:
            session.run(None, feed)
            if time.perf_counter() > deadline:
                break
            counts[index] += 1

    workers = [threading.Thread(target=stream, args=(index,)) for index in range(sessions)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return {"rate": round(sum(counts) / args.seconds, 1), "per_session": counts}


def thread_counts_up_to(limit):
    """1, 2, 4, ... up to `limit`, and `limit` itself."""
    counts, value = [], 1
    while value <= limit:
        counts.append(value)
        value *= 2
    return counts + [limit] if limit > 0 and counts[-1] != limit else counts


def parse_daemons(values):
    """`--daemon PATH` or `--daemon NAME=PATH`, repeated; the default build when none is given."""
    daemons = []
    for value in values or [str(default_daemon())]:
        name, _, path = value.rpartition("=")
        path = Path(path)
        daemons.append((name or ("daemon" if len(values or []) <= 1 else path.parent.name), path))
    return daemons


def streams_config(work, library, threads=None, workers=None):
    """A config with ONNX Runtime from `library` and every other key at its default, unless set."""
    name = f"streams-{threads or 'default'}-{workers or 'default'}.toml"
    lines = ["[device]", 'cpu_engine = "onnxruntime"', f'onnxruntime_library = "{library}"']
    if threads:
        lines.append(f"cpu_threads = {threads}")
    if workers:
        lines.append(f"cpu_workers = {workers}")
    path = work / name
    path.write_text("\n".join(lines) + "\n")
    return path


def record(runs, entry):
    """Keeps one run and prints it at once, so a run cut short still leaves every run it made."""
    runs.append(entry)
    print(json.dumps(entry), file=sys.stderr, flush=True)


def median_of(values):
    """The median of the values a run gave (None where it gave none), None if there are none."""
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def round_ratios(runs, rounds, python, daemon):
    """Each round's ratio of a daemon's frames/s (its `cameras` run that `daemon` picks) to the best
    rate of that same round's ONNX Runtime runs that `python` picks. The host's speed moves between
    rounds (the same code's rates spread by 10 % and more), so a ratio of two medians can pair a fast
    round of one side with a slow round of the other; a ratio within one round cannot."""
    ratios = []
    for round_index in range(rounds):
        best = max((r["rate"] for r in runs if r["kind"] == "python" and r["round"] == round_index
                    and r.get("rate") and python(r)), default=None)
        fps = next((r.get("fps_total") for r in runs if r["kind"] == "cameras" and r["round"] == round_index
                    and daemon(r)), None)
        if best and fps:
            ratios.append(fps / best)
    return ratios


def print_round_table(title, label, rows, names, ratios_of):
    """Prints `title` and a table of round-by-round ratios, a row per value of `rows` (headed `label`)
    and a column per daemon name: `median [each round's ratio, in round order]` of
    `ratios_of(row, name)`, or `error` where no round gave one."""
    print(title)
    print(f"| {label} | " + " | ".join(f"{name}: median [rounds]" for name in names) + " |")
    print("|---|" + "---|" * len(names))
    for row in rows:
        cells = []
        for name in names:
            ratios = ratios_of(row, name)
            cells.append(f"{statistics.median(ratios):.2f} [" + " ".join(f"{x:.2f}" for x in ratios) + "]"
                         if ratios else "error")
        print(f"| {row} | " + " | ".join(cells) + " |")


def streams_main(args, daemons, library, version, inputs, input_name, work):
    cores = args.cores or os.cpu_count()
    streams = [int(n) for n in args.streams.split(",") if n]
    thread_counts = thread_counts_up_to(cores)
    stream_threads = {n: thread_counts_up_to(cores // n) for n in streams}
    columns = sorted({t for counts in stream_threads.values() for t in counts})
    runs = []

    for round_index in range(args.rounds):
        for threads in thread_counts:
            for name, daemon in daemons:
                if args.preprocess_of and name != args.preprocess_of:
                    continue
                config = streams_config(work, library, threads=threads, workers=1)
                report = daemon_bench(daemon, config, args, cameras=1, iterations=args.preprocess_iters)
                record(runs, {"kind": "preprocess", "daemon": name, "threads": threads, "round": round_index, **report})
        for n in streams:
            jobs = [("python", t) for t in stream_threads[n]] + [("daemon", d) for d in daemons]
            shift = round_index % len(jobs)
            for kind, what in jobs[shift:] + jobs[:shift]:
                if kind == "python":
                    result = python_streams(inputs, n, what, args)
                    record(runs, {"kind": "python", "sessions": n, "threads": what, "round": round_index, **result})
                else:
                    name, daemon = what
                    iterations = max(args.camera_iters_min, args.camera_frames // n)
                    report = daemon_bench(daemon, streams_config(work, library), args, cameras=n,
                                          iterations=iterations)
                    record(runs, {"kind": "cameras", "daemon": name, "cameras": n, "round": round_index, **report})

    names = [name for name, _ in daemons]
    print(f"\nSSD MobileNet v2 300x300 u8, ONNX Runtime {version} from {library}; python input {input_name};"
          f" {args.rounds} rounds; {cores} cores; load avg now {os.getloadavg()[0]:.1f}")
    # Preprocessing alone is the same code in every binary and every run: its samples at T
    # threads are pooled (the one-frame and one-camera runs of the T table, and the cameras runs
    # whose workers preprocess on T threads), so one slow round does not move a ratio.
    alone_samples = {}

    def alone_threads(run):
        if run["kind"] == "preprocess":
            return run["threads"]
        shares = run.get("threads_per_worker")
        return 1 if run.get("overlapping") else (shares[0] if shares else None)

    for run in runs:
        for key in ("preprocess_alone_ms", "cameras_preprocess_alone_ms"):
            if run["kind"] == "cameras" and key == "preprocess_alone_ms":
                continue
            if run.get(key) is not None and alone_threads(run) is not None:
                alone_samples.setdefault(alone_threads(run), []).append(run[key])
    alone = {threads: median_of(values) for threads, values in alone_samples.items()}
    print("\nPreprocessing of the 768x576 frame, one worker at cpu_threads = T, median ms (median of the rounds):"
          " alone = nothing else running (every run's samples at T); one frame = `bench`'s one-frame stages"
          " (after the next image's decoding and an inference); one camera = `bench --cameras 1` (between"
          " inferences, as the daemon runs); each with its ratio to alone")
    preprocess_names = [args.preprocess_of] if args.preprocess_of else names
    print("| T | alone | " + " | ".join(f"{name}: one frame | {name}: one camera" for name in preprocess_names) + " |")
    print("|---|---|" + "---|---|" * len(preprocess_names))
    for threads in thread_counts:
        cells = []
        for name in preprocess_names:
            mine = [r for r in runs if r["kind"] == "preprocess" and r["daemon"] == name and r["threads"] == threads]
            for key in ("preprocess_ms", "cameras_preprocess_ms"):
                value = median_of([r.get(key) for r in mine])
                ratio = f" ({value / alone[threads]:.2f}x)" if value and alone.get(threads) else ""
                cells.append(f"{value:.3f}{ratio}" if value is not None else "error")
        base = f"{alone[threads]:.3f}" if alone.get(threads) else "-"
        print(f"| {threads} | {base} | " + " | ".join(cells) + " |")

    print("\nN streams: ONNX Runtime's Python API, N sessions x T threads (inferences/s, median of the rounds),"
          " against `bench --cameras N` with default settings (frames/s of all cameras; ratio to the best)")
    print("| N | " + " | ".join(f"{t} thr" for t in columns) + " | best ORT | "
          + " | ".join(f"{name} fps (ratio)" for name in names) + " |")
    print("|---|" + "---|" * len(columns) + "---|" + "---|" * len(names))
    for n in streams:
        rates = {}
        for threads in columns:
            rates[threads] = median_of([r["rate"] for r in runs if r["kind"] == "python"
                                        and r["sessions"] == n and r["threads"] == threads])
        best_threads = max((t for t in rates if rates[t]), key=lambda t: rates[t], default=None)
        best = rates.get(best_threads)
        cells = [f"{rates[t]:.0f}" if rates[t] else "" for t in columns]
        daemon_cells = []
        for name in names:
            fps = median_of([r.get("fps_total") for r in runs if r["kind"] == "cameras"
                             and r["daemon"] == name and r["cameras"] == n])
            daemon_cells.append(f"{fps:.0f} ({fps / best:.2f})" if fps and best else "error")
        best_cell = f"{n}x{best_threads}: {best:.0f}" if best else "-"
        print(f"| {n} | " + " | ".join(cells) + f" | {best_cell} | " + " | ".join(daemon_cells) + " |")

    print_round_table(
        "\nN streams, round by round: each daemon's frames/s over the best ONNX Runtime rate of the same round"
        " (N sessions x any T); median of the rounds [each round's ratio, in round order]", "N", streams, names,
        lambda n, name: round_ratios(runs, args.rounds, lambda r: r["sessions"] == n,
                                     lambda r: r["daemon"] == name and r["cameras"] == n))

    print("\nbench --cameras N, default settings: workers x threads, preprocessing per frame (median ms, ratio to"
          " alone on the threads it ran on: 1 for overlapping workers, else the worker's share), outside inference per frame (median ms), and inference per frame"
          " (median ms, where the binary reports it)")
    print("| N | " + " | ".join(f"{name}: workers x threads, preprocess, outside, inference" for name in names) + " |")
    print("|---|" + "---|" * len(names))
    for n in streams:
        cells = []
        for name in names:
            mine = [r for r in runs if r["kind"] == "cameras" and r["daemon"] == name and r["cameras"] == n]
            if not mine or "error" in mine[0]:
                cells.append("error")
                continue
            shares = mine[0].get("threads_per_worker")
            layout = f"{mine[0]['workers']} x {shares[0] if shares else '?'}"
            if mine[0].get("overlapping"):
                layout += " overlapping"
            pre = median_of([r.get("cameras_preprocess_ms") for r in mine])
            reference = alone.get(alone_threads(mine[0]))
            pre_cell = "-" if pre is None else f"{pre:.3f}" + (f" ({pre / reference:.2f}x)" if reference else "")
            outside = median_of([r.get("outside_inference_ms") for r in mine])
            inference = median_of([r.get("cameras_inference_ms") for r in mine])
            cell = f"{layout}, {pre_cell}, " + ("-" if outside is None else f"{outside:.2f}")
            cells.append(cell + ("" if inference is None else f", {inference:.2f}"))
        print(f"| {n} | " + " | ".join(cells) + " |")
    if args.json:
        args.json.write_text(json.dumps(runs, indent=1))


def one_camera_main(args, daemons, version, library, inputs, work):
    """One camera on one worker of T threads: where a worker's share is large (does overlapping
    preprocessing with inference pay at this T?). Interleaved rounds, medians."""
    thread_counts = [int(t) for t in args.one_camera.split(",") if t]
    runs = []
    for round_index in range(args.rounds):
        for threads in thread_counts:
            result = python_streams(inputs, 1, threads, args)
            record(runs, {"kind": "python", "threads": threads, "round": round_index, **result})
            order = daemons if round_index % 2 == 0 else daemons[::-1]
            for name, daemon in order:
                config = streams_config(work, library, threads=threads, workers=1)
                report = daemon_bench(daemon, config, args, cameras=1, iterations=args.camera_frames)
                record(runs, {"kind": "cameras", "daemon": name, "threads": threads, "round": round_index, **report})

    names = [name for name, _ in daemons]
    print(f"\nOne camera, one worker at cpu_threads = T; ONNX Runtime {version}; {args.rounds} rounds (medians):"
          " ONNX Runtime's Python API 1 session x T threads (inferences/s) against `bench --cameras 1`"
          " (frames/s; inference, preprocessing, and the worker's time between frames outside every stage, per frame,"
          " median ms)")
    print("| T | ONNX Runtime 1 x T | " + " | ".join(f"{name}: fps, inference, preprocess, between" for name in names)
          + " |")
    print("|---|---|" + "---|" * len(names))
    for threads in thread_counts:
        rate = median_of([r["rate"] for r in runs if r["kind"] == "python" and r["threads"] == threads])
        cells = []
        for name in names:
            mine = [r for r in runs if r["kind"] == "cameras" and r["daemon"] == name and r["threads"] == threads]
            fps, inference, pre, between = (
                median_of([r.get(key) for r in mine])
                for key in ("fps_total", "cameras_inference_ms", "cameras_preprocess_ms", "between_frames_ms"))
            between_cell = "-" if between is None else f"{between:.2f}"
            cells.append(f"{fps:.0f}, {inference:.2f}, {pre:.2f}, {between_cell}" if fps and inference and pre
                         else "error")
        print(f"| {threads} | {rate:.0f} | " + " | ".join(cells) + " |")

    print_round_table(
        "\nOne camera, round by round: each daemon's frames/s at cpu_threads = T over the best 1-session rate"
        " ONNX Runtime reached in the same round (any T run); median of the rounds [each round's ratio, in round"
        " order]", "T", thread_counts, names,
        lambda threads, name: round_ratios(runs, args.rounds, lambda r: True,
                                           lambda r: r["daemon"] == name and r["threads"] == threads))
    if args.json:
        args.json.write_text(json.dumps(runs, indent=1))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--daemon", action="append",
                        help="the binary to run, PATH or NAME=PATH; repeat to compare (default: target/release)")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--cameras", default="", help="e.g. 1,4,8: also bench --cameras N per daemon engine")
    parser.add_argument("--camera-threads", type=int, default=os.cpu_count())
    parser.add_argument("--repo", type=Path, help="checkout whose models/ to use (default: this script's)")
    parser.add_argument("--streams", default="", help="e.g. 1,2,4,8,16: the multi-stream comparison instead")
    parser.add_argument("--seconds", type=float, default=3.0, help="--streams: each Python run's window")
    parser.add_argument("--cores", type=int, help="--streams: cores to share (default: all of this machine's)")
    parser.add_argument("--camera-frames", type=int, default=600,
                        help="--streams: frames per `bench --cameras N` run, split over the cameras")
    parser.add_argument("--camera-iters-min", type=int, default=60, help="--streams: at least this many per camera")
    parser.add_argument("--preprocess-iters", type=int, default=100, help="--streams: frames per preprocessing run")
    parser.add_argument("--preprocess-of", metavar="NAME",
                        help="--streams: measure preprocessing with this --daemon only (builds whose one-worker"
                             " preprocessing is the same code)")
    parser.add_argument("--json", type=Path, help="--streams, --one-camera: write every run to this file")
    parser.add_argument("--one-camera", default="", metavar="T,...",
                        help="e.g. 8,12,16: one camera at cpu_threads = T (one worker) per --daemon, against"
                             " ONNX Runtime's Python API as 1 session x T threads, instead")
    args = parser.parse_args()
    if args.repo:
        use_repo(args.repo.resolve())
    daemons = parse_daemons(args.daemon)
    library, version = python_library()
    inputs, input_name = python_input()
    work = Path(tempfile.mkdtemp(prefix="ort-vs-daemon-"))
    if args.streams:
        streams_main(args, daemons, library, version, inputs, input_name, work)
        return
    if args.one_camera:
        one_camera_main(args, daemons, version, library, inputs, work)
        return
    daemon = daemons[0][1]
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
                    report = daemon_bench(daemon, write_config(work, engine, threads, library), args)
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
                report = daemon_bench(daemon, config, args, cameras=n)
                print(json.dumps({"engine": engine, "cameras": n, **report}), file=sys.stderr, flush=True)
                cells.append("error" if "error" in report else f"{report['fps_total']:.1f} ({report['workers']})")
            print(f"| {engine} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
