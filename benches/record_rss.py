#!/usr/bin/env python3
"""What recording costs the daemon in memory (not a test): its RSS with 4 recording RTSP cameras
against the same daemon with recording off.

Starts mosquitto and four RTSP servers (tests/it/rtsp_server.py: x264 of videotestsrc's snow,
1280x720, 10 frames a second, a keyframe every second, --kbps kbit/s: noise, so that the encoder
spends the whole bitrate as a real scene would), then runs `jetson-detectd run` twice on them: with
`[record] enabled = true` (defaults otherwise: `pre_s` = 5) and with it off. Each run waits
--warmup seconds (the pre-roll fills in `pre_s` + 3 s + a keyframe interval), then samples the
daemon's RSS (/proc) every second for --seconds, and prints the minimum, median and maximum, and,
with recording on, each camera's pre-roll as telemetry says (`record.cameras.<name>.preroll_bytes`
in /api/status). Nothing triggers a clip (the test pattern shows no object): what is measured is
the standing cost of being ready to record, the pre-roll.

Needs mosquitto, Debian's python3-gi with gst-rtsp-server and x264enc (as tests/it/rtsp.rs), and a
built daemon:

    cargo build --release --features gstreamer && python3 benches/record_rss.py

The RSS of a daemon varies with its decoder and inference buffers by more than the pre-roll; read
the two runs' ranges together, and report them with the machine and its load.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from benchlib import REPO, default_binary, documented_config, find_program, free_port, rss_kib, wait_port

CAMERAS = ("cam1", "cam2", "cam3", "cam4")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", type=Path, default=default_binary())
    parser.add_argument("--warmup", type=float, default=20.0, help="seconds before the first sample")
    parser.add_argument("--seconds", type=float, default=30.0, help="seconds of samples per run")
    parser.add_argument("--kbps", type=int, default=2000, help="each camera's bitrate, kbit/s")
    return parser.parse_args()


def daemon_config(broker_port, http_port, rtsp_ports, clips, record):
    text = documented_config([
        ("mqtt", "host", '"127.0.0.1"'),
        ("mqtt", "port", str(broker_port)),
        ("mqtt", "prefix", '"record-rss"'),
        ("mqtt", "client_id", '"record-rss-daemon"'),
        ("http", "listen", json.dumps(f"127.0.0.1:{http_port}")),
        ("http", "zones_file", json.dumps(str(clips.parent / "zones.toml"))),
        ("controls", "file", json.dumps(str(clips.parent / "controls.toml"))),
        ("telemetry", "interval_s", "1"),
        ("record", "enabled", "true" if record else "false"),
        ("record", "dir", json.dumps(str(clips))),
    ])
    for name, port in zip(CAMERAS, rtsp_ports):
        text += f'\n[[camera]]\nname = "{name}"\nsource = {{ kind = "rtsp", url = "rtsp://127.0.0.1:{port}/test" }}\n'
    return text


def run(args, workdir, broker_port, rtsp_ports, record):
    clips = workdir / ("clips-on" if record else "clips-off")
    http_port = free_port()
    config = workdir / f"config-{'on' if record else 'off'}.toml"
    config.write_text(daemon_config(broker_port, http_port, rtsp_ports, clips, record))
    log = open(workdir / f"daemon-{'on' if record else 'off'}.log", "w")
    daemon = subprocess.Popen([str(args.binary), "run", "--config", str(config)], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=log)
    try:
        wait_port(http_port, daemon, "the daemon", "record_rss")
        time.sleep(args.warmup)
        samples = []
        for _ in range(int(args.seconds)):
            rss = rss_kib(daemon.pid)
            if daemon.poll() is not None or rss is None:
                sys.exit(f"record_rss: the daemon exited; see {log.name}")
            samples.append(rss)
            time.sleep(1)
        with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/api/status", timeout=10) as answer:
            status = json.load(answer)
    finally:
        daemon.terminate()
        daemon.wait()
    cameras = status.get("telemetry", {}).get("record", {}).get("cameras", {})
    preroll = {name: cameras.get(name, {}).get("preroll_bytes") for name in CAMERAS}
    return samples, preroll


def main():
    args = parse_args()
    if not args.binary.is_file():
        sys.exit(f"record_rss: {args.binary} does not exist; build it first or pass --binary")
    workdir = Path(tempfile.mkdtemp(prefix="jetson-detectd-record-rss-"))
    broker_port = free_port()
    broker_config = workdir / "mosquitto.conf"
    broker_config.write_text(f"listener {broker_port} 127.0.0.1\nallow_anonymous true\n")
    processes = [subprocess.Popen([find_program("mosquitto", "record_rss"), "-c", str(broker_config)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        wait_port(broker_port, processes[0], "mosquitto", "record_rss")
        rtsp_ports = []
        for _ in CAMERAS:
            port = free_port()
            env = dict(os.environ, RTSP_PATTERN="snow", RTSP_BITRATE_KBPS=str(args.kbps))
            server = subprocess.Popen(["/usr/bin/python3", str(REPO / "tests/it/rtsp_server.py"), str(port), "h264",
                                       "1280x720", "10"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            processes.append(server)
            wait_port(port, server, "an RTSP server", "record_rss")
            rtsp_ports.append(port)
        for record in (True, False):
            samples, preroll = run(args, workdir, broker_port, rtsp_ports, record)
            print(f"recording {'on ' if record else 'off'}: RSS min {min(samples) / 1024:.0f} MiB, median "
                  f"{statistics.median(samples) / 1024:.0f} MiB, max {max(samples) / 1024:.0f} MiB "
                  f"({len(samples)} samples)")
            if record:
                print(f"  expected pre-roll: {args.kbps} kbit/s x (pre_s 5 + 3 s + a 1 s keyframe interval) = "
                      f"{args.kbps * 1000 / 8 * 9 / 2**20:.2f} MiB a camera")
                held = ", ".join(f"{name} {(bytes or 0) / 2**20:.2f} MiB" for name, bytes in preroll.items())
                print(f"  pre-roll (telemetry): {held}")
    finally:
        for process in processes:
            process.terminate()
            process.wait()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
