#!/usr/bin/env python3
"""Glass-to-glass delay of the live video (not a test): from the moment a camera made a picture to
the moment the page shows it, over loopback.

Starts mosquitto, a clock camera (this script with --camera: gst-rtsp-server serving x264 of
frames that carry the wall clock at which each was made, in milliseconds, as 48 black and white
blocks, with the complement of each bit below it so that a half-decoded band is refused), the
daemon with that camera, and headless Chromium (through chromedriver) on the daemon's page. In the
page, every frame the live video presents (`requestVideoFrameCallback`) is drawn on a canvas, its
blocks read back, and the page's clock at its expected display time taken against the frame's.
Prints the median, the 95th percentile and the range over --samples frames, and splits the delay
in two: how far behind the newest picture the page had each frame was shown (live.js waits as long
as detection lags, at least 0.3 s, so that the boxes are drawn on their picture: its `data-delay`)
and the rest, from the camera to the page's buffer (encoding, RTSP, the daemon, HTTP, MSE).

Both clocks are the same machine's, so no synchronisation is needed. The page's time is when
Chromium expects to show the frame; a real screen adds its own refresh (up to a frame) on top.

Needs mosquitto, Debian's python3-gi with gst-rtsp-server and x264enc (as tests/it/rtsp.rs),
chromium with chromedriver, and a built daemon:

    cargo build --release --features gstreamer && /usr/bin/python3 benches/glass_to_glass.py
"""

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from benchlib import default_binary, documented_config, find_program, free_port, wait_port

BITS = 48
BLOCK = 24
TOP = 8
GAP = 8


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", type=Path, default=default_binary())
    parser.add_argument("--samples", type=int, default=300, help="frames to measure")
    parser.add_argument("--warmup", type=float, default=10.0, help="seconds of playing before the first sample")
    parser.add_argument("--size", default="1280x720", help="the camera's picture, WIDTHxHEIGHT")
    parser.add_argument("--fps", type=int, default=25, help="the camera's frame rate")
    parser.add_argument("--detect-fps", type=float, default=0.0,
                        help="the camera's `fps` in the daemon: frames detected a second (0: as many as it can)")
    parser.add_argument("--camera", type=int, metavar="PORT", help=argparse.SUPPRESS)
    return parser.parse_args()


# The camera (run as `glass_to_glass.py --camera PORT`, under /usr/bin/python3 with gi).

def serve_clock_camera(port, size, fps):
    """Serves rtsp://127.0.0.1:PORT/test: frames stamped with the wall clock when they were made."""
    import gi

    gi.require_version("Gst", "1.0")
    gi.require_version("GstRtspServer", "1.0")
    from gi.repository import GLib, Gst, GstRtspServer

    width, height = (int(side) for side in size.split("x"))
    if width < BITS * BLOCK:
        sys.exit(f"glass_to_glass: the picture must be at least {BITS * BLOCK} pixels wide")
    Gst.init(None)
    luma = width * height
    grey = bytes([128]) * luma + bytes([128]) * (luma // 2)
    launch = (
        "( appsrc name=clock is-live=true do-timestamp=true format=time"
        f" ! video/x-raw,format=I420,width={width},height={height},framerate={fps}/1"
        " ! x264enc tune=zerolatency speed-preset=ultrafast key-int-max=" + str(fps) +
        " ! rtph264pay name=pay0 pt=96 config-interval=-1 )"
    )
    sources = []

    def band_line(value):
        line = bytearray([128]) * width
        for bit in range(BITS):
            on = (value >> (BITS - 1 - bit)) & 1
            line[bit * BLOCK:(bit + 1) * BLOCK] = bytes([235 if on else 16]) * BLOCK
        return bytes(line)

    def frame():
        made_ms = time.time_ns() // 1_000_000
        picture = bytearray(grey)
        rows = ((TOP, band_line(made_ms)), (TOP + BLOCK + GAP, band_line(~made_ms & ((1 << BITS) - 1))))
        for top, line in rows:
            for y in range(top, top + BLOCK):
                picture[y * width:(y + 1) * width] = line
        return bytes(picture)

    def tick():
        for source in sources:
            source.emit("push-buffer", Gst.Buffer.new_wrapped(frame()))
        return True

    def configure(_factory, media):
        sources.append(media.get_element().get_child_by_name("clock"))

    server = GstRtspServer.RTSPServer()
    server.set_address("127.0.0.1")
    server.set_service(str(port))
    factory = GstRtspServer.RTSPMediaFactory()
    factory.set_launch(launch)
    factory.set_shared(True)
    factory.connect("media-configure", configure)
    server.get_mount_points().add_factory("/test", factory)
    if server.attach(None) == 0:
        sys.exit(f"glass_to_glass: cannot listen on 127.0.0.1:{port}")
    GLib.timeout_add(max(1, 1000 // fps), tick)
    print("listening", flush=True)
    GLib.MainLoop().run()


# The page: collects (page ms - frame ms) for every presented frame whose band reads back whole.

COLLECT = """
const video = document.querySelector('section[data-camera="clock"] .live-video');
if (!video || video.hidden || video.readyState < 2) return false;
if (window.glass) return true;
window.glass = { samples: [], behind: [], refused: 0 };
const canvas = document.createElement('canvas');
canvas.width = %(width)d; canvas.height = %(band)d;
const g = canvas.getContext('2d', { willReadFrequently: true });
const read = (data, row) => {
  let value = 0n;
  for (let bit = 0; bit < %(bits)d; bit++) {
    const x = bit * %(block)d + %(block)d / 2, y = row + %(block)d / 2;
    value = (value << 1n) | (data[(y * %(width)d + x) * 4] > 128 ? 1n : 0n);
  }
  return value;
};
const each = (now, meta) => {
  g.drawImage(video, 0, 0, %(width)d, %(band)d, 0, 0, %(width)d, %(band)d);
  const data = g.getImageData(0, 0, %(width)d, %(band)d).data;
  const value = read(data, %(top)d), check = read(data, %(top)d + %(block)d + %(gap)d);
  if ((value ^ check) === (1n << %(bits)dn) - 1n) {
    window.glass.samples.push(performance.timeOrigin + meta.expectedDisplayTime - Number(value));
    const ranges = video.buffered;
    window.glass.behind.push(ranges.length ? 1000 * (ranges.end(ranges.length - 1) - meta.mediaTime) : 0);
  } else {
    window.glass.refused += 1;
  }
  video.requestVideoFrameCallback(each);
};
video.requestVideoFrameCallback(each);
return true;
"""


class Driver:
    """chromedriver, spoken to with plain JSON over HTTP."""

    def __init__(self, workdir):
        self.process = subprocess.Popen([find_program("chromedriver", "glass_to_glass"), "--port=0"],
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        for line in self.process.stdout:
            found = re.search(r"started successfully on port (\d+)", line)
            if found:
                self.port = int(found.group(1))
                break
        else:
            sys.exit("glass_to_glass: chromedriver did not start")
        args = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--window-size=1400,1000",
                "--autoplay-policy=no-user-gesture-required", f"--user-data-dir={workdir / 'profile'}"]
        capabilities = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome", "goog:chromeOptions": {"binary": "/usr/bin/chromium", "args": args}}}}
        self.session = self.call("POST", "/session", capabilities)["sessionId"]

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as answer:
            return json.load(answer)["value"]

    def go(self, url):
        self.call("POST", f"/session/{self.session}/url", {"url": url})

    def script(self, script):
        return self.call("POST", f"/session/{self.session}/execute/sync", {"script": script, "args": []})

    def close(self):
        try:
            self.call("DELETE", f"/session/{self.session}")
        finally:
            self.process.terminate()
            self.process.wait()


def wait_for(what, seconds, check):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    sys.exit(f"glass_to_glass: no {what} after {seconds:.0f} s")


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def main():
    args = parse_args()
    if args.camera is not None:
        serve_clock_camera(args.camera, args.size, args.fps)
        return
    if not args.binary.is_file():
        sys.exit(f"glass_to_glass: {args.binary} does not exist; build it first or pass --binary")
    width = int(args.size.split("x")[0])
    workdir = Path(tempfile.mkdtemp(prefix="jetson-detectd-glass-"))
    processes = []
    driver = None
    try:
        broker_port = free_port()
        (workdir / "mosquitto.conf").write_text(f"listener {broker_port} 127.0.0.1\nallow_anonymous true\n")
        processes.append(subprocess.Popen([find_program("mosquitto", "glass_to_glass"), "-c",
                                           str(workdir / "mosquitto.conf")],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_port(broker_port, processes[-1], "mosquitto", "glass_to_glass")
        camera_port = free_port()
        processes.append(subprocess.Popen(["/usr/bin/python3", __file__, "--camera", str(camera_port),
                                           "--size", args.size, "--fps", str(args.fps)],
                                          stdout=subprocess.DEVNULL))
        wait_port(camera_port, processes[-1], "the clock camera", "glass_to_glass")
        http_port = free_port()
        config = documented_config([
            ("mqtt", "host", '"127.0.0.1"'),
            ("mqtt", "port", str(broker_port)),
            ("mqtt", "prefix", '"glass"'),
            ("mqtt", "client_id", '"glass-daemon"'),
            ("http", "listen", json.dumps(f"127.0.0.1:{http_port}")),
            ("http", "zones_file", json.dumps(str(workdir / "zones.toml"))),
            ("controls", "file", json.dumps(str(workdir / "controls.toml"))),
        ])
        config += (f'\n[[camera]]\nname = "clock"\nfps = {args.detect_fps!r}\n'
                   f'source = {{ kind = "rtsp", url = "rtsp://127.0.0.1:{camera_port}/test" }}\n')
        (workdir / "config.toml").write_text(config)
        log = open(workdir / "daemon.log", "w")
        processes.append(subprocess.Popen([str(args.binary), "run", "--config", str(workdir / "config.toml")],
                                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log))
        wait_port(http_port, processes[-1], "the daemon", "glass_to_glass")
        driver = Driver(workdir)
        driver.go(f"http://127.0.0.1:{http_port}/")
        band = TOP + 2 * BLOCK + GAP
        collect = COLLECT % {"width": width, "band": band, "bits": BITS, "block": BLOCK, "top": TOP, "gap": GAP}
        wait_for("live video in the page", 120, lambda: driver.script(collect))
        time.sleep(args.warmup)
        driver.script("window.glass.samples = []; window.glass.behind = []; window.glass.refused = 0; return true;")
        wait_for(f"{args.samples} frames read", args.samples / args.fps * 10 + 60,
                 lambda: driver.script(f"return window.glass.samples.length >= {args.samples};"))
        glass = driver.script("return window.glass;")
        delay = driver.script("return document.querySelector('section[data-camera=\"clock\"] .live-video')"
                              ".dataset.delay;")
    finally:
        if driver is not None:
            driver.close()
        for process in reversed(processes):
            process.terminate()
            process.wait()
        shutil.rmtree(workdir, ignore_errors=True)
    samples = glass["samples"][:args.samples]
    behind = glass["behind"][:args.samples]
    # The buffer ends one frame after the newest picture's start (its duration): add that frame back.
    frame_ms = 1000 / args.fps
    received = [total - kept + frame_ms for total, kept in zip(samples, behind)]
    detected = f"detection at most {args.detect_fps:g} fps" if args.detect_fps else "detection as fast as it goes"
    print(f"glass-to-glass over {len(samples)} frames ({args.size} at {args.fps} fps, {detected}, {glass['refused']} frames "
          f"whose band did not read back): median {statistics.median(samples):.0f} ms, "
          f"p95 {percentile(samples, 0.95):.0f} ms, min {min(samples):.0f} ms, max {max(samples):.0f} ms")
    print(f"  of which the page held the frame behind the newest picture it had: median "
          f"{statistics.median(behind):.0f} ms (live.js's data-delay at the end: {delay} s); camera to the "
          f"page's buffer: median {statistics.median(received):.0f} ms, p95 {percentile(received, 0.95):.0f} ms")


if __name__ == "__main__":
    main()
