#!/usr/bin/env python3
"""Soak benchmark (not a test): bounded memory and no lost messages over time.

Runs `jetson-detectd run` for N minutes at full speed (no fps cap) with two cameras looping over the
bundled sample images, every frame published (`mqtt.publish = "every_frame"`, QoS 1), against a real
mosquitto that is restarted every minute, and prints:

- the daemon's RSS at start (after its first frame), at the end and the maximum (/proc, every second),
  and the peak of every minute, so that a long soak shows whether memory reaches a plateau;
- frames processed and dropped per camera (drops: gaps in the frame numbers, i.e. frames the ring
  replaced because inference was behind);
- messages published (one per processed frame, from the daemon's per-frame debug log of the inference
  worker) against messages received by a subscriber, and the messages lost: published and never
  received; the frame counts are checked against the daemon's last telemetry (`cameras.<name>.frames`),
  so a log line that moved or changed stops the soak instead of reporting 0 frames.

How "lost" is kept honest: the subscriber (mosquitto_sub) has a persistent session (`-c`, fixed
client id) and QoS 1 subscriptions, and the broker persists to disk (`autosave_on_changes`), so
messages queued for the subscriber while it reconnects survive a broker restart. The broker is
restarted with SIGTERM by default: mosquitto then writes every message it has acknowledged to its
database before exiting, so a message missing at the subscriber was lost by the daemon (or dropped by
its bounded queue, which telemetry counts as `mqtt.dropped`). With `--restart-signal kill` the broker
crashes instead; a message it acknowledged but had not saved yet is then lost by the broker, not the
daemon, so use that mode to see the daemon survive crashes, not to count its losses.

Needs mosquitto and mosquitto_sub on PATH (/usr/sbin is searched too) and a built daemon:

    cargo build --release && python3 benches/soak.py --minutes 10

The numbers depend on the machine and on everything else it runs; report them with that context.
"""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchlib import MODELS, default_binary, documented_config, find_program, free_port, rss_kib

PREFIX = "soak"
CAMERAS = ("front", "back")
FRAME_LINE = re.compile(r"camera (\S+) frame (\d+): ")
FRAME_LOG_MODULES = ("jetson_detectd::scheduler", "jetson_detectd::infer::scheduler")
INSTALL_HINT = "; apt-get install mosquitto mosquitto-clients"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", type=Path, default=default_binary())
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--restart-every", type=float, default=60.0, help="seconds between broker restarts")
    parser.add_argument("--down", type=float, default=5.0, help="seconds the broker stays down each time")
    parser.add_argument("--restart-signal", choices=("term", "kill"), default="term")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs) and print its path")
    return parser.parse_args()


def daemon_config(port):
    text = documented_config([
        ("mqtt", "host", '"127.0.0.1"'),
        ("mqtt", "port", str(port)),
        ("mqtt", "prefix", f'"{PREFIX}"'),
        ("mqtt", "client_id", '"soak-daemon"'),
        ("mqtt", "qos", "1"),
        ("mqtt", "publish", '"every_frame"'),
        ("telemetry", "interval_s", "5"),
    ])
    samples = json.dumps(str(MODELS / "samples"))
    for name in CAMERAS:
        text += f'\n[[camera]]\nname = "{name}"\nfps = 0.0\nsource = {{ kind = "images", path = {samples}, mode = "loop" }}\n'
    return text


class Broker:
    """mosquitto with persistence in `workdir`, restartable on the same port."""

    def __init__(self, workdir, port, restart_signal):
        self.program = find_program("mosquitto", "soak", INSTALL_HINT)
        self.port = port
        self.signal = signal.SIGTERM if restart_signal == "term" else signal.SIGKILL
        self.config = workdir / "mosquitto.conf"
        self.config.write_text(
            f"listener {port} 127.0.0.1\nallow_anonymous true\n"
            f"persistence true\npersistence_location {workdir}/\npersistence_file mosquitto.db\n"
            "autosave_interval 1\nautosave_on_changes true\n"
            "max_queued_messages 1000000\nmax_inflight_messages 0\n"
            f"log_dest file {workdir}/mosquitto.log\nuser root\n"
        )
        self.process = None
        self.restarts = 0

    def start(self):
        deadline = time.monotonic() + 30
        while True:
            self.process = subprocess.Popen([self.program, "-c", str(self.config)], stdin=subprocess.DEVNULL,
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            while time.monotonic() < deadline and self.process.poll() is None:
                try:
                    socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                    return
                except OSError:
                    time.sleep(0.05)
            if time.monotonic() >= deadline:
                sys.exit("soak: mosquitto did not start")
            time.sleep(0.2)  # the port is still in TIME_WAIT or taken; try again

    def stop(self):
        if self.process is not None:
            self.process.send_signal(self.signal)
            self.process.wait()
            self.process = None

    def restart(self, down):
        self.stop()
        time.sleep(down)
        self.start()
        self.restarts += 1


def peaks_per_minute(samples, per_minute=60):
    """The highest of each minute's samples (one sample a second)."""
    return [max(samples[i:i + per_minute]) for i in range(0, len(samples), per_minute)]


def main():
    args = parse_args()
    if not args.binary.is_file():
        sys.exit(f"soak: {args.binary} does not exist; build it first (cargo build --release) or pass --binary")
    workdir = Path(tempfile.mkdtemp(prefix="jetson-detectd-soak-"))
    port = free_port()
    broker = Broker(workdir, port, args.restart_signal)
    broker.start()

    received_path = workdir / "received.txt"
    subscriber = subprocess.Popen(
        [find_program("mosquitto_sub", "soak", INSTALL_HINT), "-h", "127.0.0.1", "-p", str(port),
         "-i", "soak-subscriber", "-c", "-q", "1", "-t", f"{PREFIX}/+/detections", "-t", f"{PREFIX}/telemetry",
         "-F", "%t %p"],
        stdout=open(received_path, "w"), stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    time.sleep(1)

    config_path = workdir / "config.toml"
    config_path.write_text(daemon_config(port))
    log_path = workdir / "daemon.log"
    # The per-frame line comes from the inference worker (the scheduler module, before and after
    # the layout that moved it under infer/).
    env = dict(os.environ, RUST_LOG=f"info,{','.join(m + '=debug' for m in FRAME_LOG_MODULES)}")
    env.pop("NOTIFY_SOCKET", None)
    daemon = subprocess.Popen([str(args.binary), "run", "--config", str(config_path)], env=env,
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=open(log_path, "w"))

    # RSS every second, from the first processed frame on.
    samples = []
    running = threading.Event()
    running.set()

    def sample_rss():
        while running.is_set() and daemon.poll() is None:
            if samples or FRAME_LINE.search(log_path.read_text(errors="replace")[-100_000:]):
                value = rss_kib(daemon.pid)
                if value is not None:
                    samples.append(value)
            time.sleep(1)

    sampler = threading.Thread(target=sample_rss, daemon=True)
    sampler.start()

    started = time.monotonic()
    end = started + args.minutes * 60
    next_restart = started + args.restart_every
    while time.monotonic() < end:
        if daemon.poll() is not None:
            sys.exit(f"soak: the daemon exited with {daemon.returncode}; log: {log_path}")
        if time.monotonic() >= next_restart and next_restart + args.down < end:
            broker.restart(args.down)
            next_restart += args.restart_every
        time.sleep(0.2)
    # Let the daemon deliver what it queued during the last outage before it stops.
    time.sleep(5)
    running.clear()
    sampler.join()
    daemon.send_signal(signal.SIGTERM)
    exit_code = daemon.wait(timeout=60)
    # The subscriber drains what the broker still holds for it.
    last_size, stable_since = -1, time.monotonic()
    while time.monotonic() - stable_since < 3:
        size = received_path.stat().st_size
        if size != last_size:
            last_size, stable_since = size, time.monotonic()
        time.sleep(0.5)
    subscriber.terminate()
    subscriber.wait()
    broker.signal = signal.SIGTERM
    broker.stop()

    processed = {name: set() for name in CAMERAS}
    for match in FRAME_LINE.finditer(log_path.read_text(errors="replace")):
        processed.setdefault(match.group(1), set()).add(int(match.group(2)))
    received = {name: [] for name in CAMERAS}
    telemetry = None
    for line in received_path.read_text(errors="replace").splitlines():
        topic, _, payload = line.partition(" ")
        try:
            message = json.loads(payload)
        except json.JSONDecodeError:
            continue
        if topic == f"{PREFIX}/telemetry":
            telemetry = message
        elif topic.endswith("/detections"):
            received.setdefault(message["camera"], []).append(message["frame"])

    minutes = (time.monotonic() - started) / 60
    print(f"soak: {minutes:.1f} min, {len(CAMERAS)} cameras at full speed (bundled model, CPU backend, "
          f"{args.binary}), broker restarted {broker.restarts} times "
          f"(SIG{args.restart_signal.upper()}, down {args.down:.0f} s), daemon exit status {exit_code}")
    if samples:
        mib = lambda kib: kib / 1024
        print(f"rss: start {mib(samples[0]):.1f} MiB, end {mib(samples[-1]):.1f} MiB, "
              f"max {mib(max(samples)):.1f} MiB ({len(samples)} samples, 1 s apart)")
        print("rss peak per minute (MiB): " + " ".join(f"{mib(peak):.1f}" for peak in peaks_per_minute(samples)))
    total_published = total_received = total_lost = 0
    for name in CAMERAS:
        frames = processed.get(name, set())
        got = received.get(name, [])
        unique = set(got)
        lost = frames - unique
        highest = max(frames, default=-1)
        dropped = highest + 1 - len(frames)
        total_published += len(frames)
        total_received += len(unique)
        total_lost += len(lost)
        print(f"camera {name}: {len(frames)} frames processed, {dropped} dropped before inference; "
              f"messages: {len(frames)} published, {len(unique)} received "
              f"(+{len(got) - len(unique)} duplicates), {len(lost)} lost"
              + (f" (frames {sorted(lost)[:10]}…)" if lost else ""))
    counted = {name: camera.get("frames", 0) for name, camera in (telemetry or {}).get("cameras", {}).items()}
    if sum(counted.values()) > 0 and total_published == 0:
        sys.exit(f"soak: telemetry counts frames ({counted}) but the log has no per-frame line matching "
                 f"{FRAME_LINE.pattern!r} from {FRAME_LOG_MODULES}: the log line moved; fix FRAME_LINE/FRAME_LOG_MODULES")
    print(f"daemon's last telemetry (5 s apart, so a few frames behind): frames per camera {json.dumps(counted)}")
    mqtt = (telemetry or {}).get("mqtt", {})
    print(f"total: {total_published} published, {total_received} received, {total_lost} lost; "
          f"daemon's last telemetry: mqtt {json.dumps(mqtt)}")
    if args.keep:
        print(f"work directory: {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if total_lost or exit_code != 0 else 0


if __name__ == "__main__":
    sys.exit(main())
