"""What the Python benchmarks that run the daemon share (benches/soak.py, benches/record_rss.py,
benches/glass_to_glass.py): where the release binary is, finding a program, a free port and waiting
for a process to listen on one, the daemon's config from the documented one, and the daemon's RSS.

A library, not a benchmark: it runs nothing on import and prints nothing. The scripts import it by
name; Python puts a script's own folder first on the module path, so they run from any working
directory. It must not hold one benchmark's policy (its cameras, MQTT settings or sampling): each
script keeps those.
"""

import json
import os
import shutil
import socket
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MODELS = REPO / "models"


def default_binary():
    """The release daemon that `cargo build --release` writes ($CARGO_TARGET_DIR, else target/)."""
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    return target / "release" / "jetson-detectd"


def find_program(name, script, hint=""):
    """The path of `name` on PATH or in the sbin folders (where Debian puts mosquitto); exits with
    `script: name not found` and the hint when there is none."""
    path = shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/local/sbin")
    if path is None:
        sys.exit(f"{script}: {name} not found{hint}")
    return path


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_port(port, process, what, script):
    """Waits up to a minute for `process` (`what`) to listen on loopback's `port`; exits with
    `script: what did not start` when it does not, or exits first."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    sys.exit(f"{script}: {what} did not start")


def set_key(text, section, key, value):
    """Sets `key = value` in `[section]` of the documented config, where the file has it (or has it
    commented out), as the integration tests' TestConfig does."""
    lines = text.split("\n")
    start = lines.index(f"[{section}]")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("[")), len(lines))
    for i in range(start + 1, end):
        if lines[i].startswith(f"{key} = ") or lines[i].startswith(f"# {key} = "):
            lines[i] = f"{key} = {value}"
            return "\n".join(lines)
    raise KeyError(f"no {key} in [{section}]")


def documented_config(settings):
    """The documented config (config/jetson-detectd.toml) without its example cameras, on the CPU
    backend with the bundled model, with each `(section, key, value)` of `settings` set; the caller
    appends its own `[[camera]]` tables."""
    text = (REPO / "config" / "jetson-detectd.toml").read_text()
    start = text.index("\n[[camera]]\n")
    # Up to the next table: the example camera's zones and lines are commented out.
    text = text[:start] + text[text.index("\n[", start + 1):]
    bundled_model = [
        ("device", "backend", '"cpu"'),
        ("model", "onnx", json.dumps(str(MODELS / "ssd_mobilenet_v2_coco_prenms_fp32.onnx"))),
        ("model", "labels", json.dumps(str(MODELS / "coco_labels.txt"))),
    ]
    for section, key, value in bundled_model + list(settings):
        text = set_key(text, section, key, value)
    return text


def rss_kib(pid):
    """The resident set size of process `pid` in KiB, None once it has exited."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None
