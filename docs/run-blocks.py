#!/usr/bin/env python3
"""Runs every shell block of the book (and README.md) that is marked as runnable; CI's proof that
the commands the documentation shows work.

  python3 docs/run-blocks.py [--binary PATH] [--list] [FILE.md ...]

A block is runnable when the line before its opening fence is `<!-- runnable -->` (invisible in the
rendered book and on GitHub):

    <!-- runnable -->
    ```sh
    jetson-detectd detect models/samples/dog.jpg
    ```

Each block runs on its own, with bash (`set -euo pipefail`), from the repository root, with a
`jetson-detectd` on PATH that is the built binary ($CARGO_TARGET_DIR/debug/jetson-detectd, else
target/debug/jetson-detectd, or --binary), in a scratch HOME and XDG_CACHE_HOME, under a
60-second limit. Blocks must therefore be self-contained and fast: they run on the CPU path of a
machine without a GPU, a camera or a broker (commands that need those are not marked).
Exit status 1 when any block fails; each failure is printed with its file, line and output.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MARKER = "<!-- runnable -->"
TIMEOUT_S = 60


def blocks(path):
    """(line number, code) of every marked shell block of a Markdown file."""
    lines = path.read_text().splitlines()
    found = []
    for index, line in enumerate(lines):
        if line.strip() != MARKER:
            continue
        fence = lines[index + 1] if index + 1 < len(lines) else ""
        if not re.match(r"^```(sh|bash|console)?\s*$", fence.strip()):
            raise SystemExit(f"{path}:{index + 1}: {MARKER} must be followed by a ```sh block")
        body = []
        for code in lines[index + 2 :]:
            if code.strip() == "```":
                break
            body.append(code)
        else:
            raise SystemExit(f"{path}:{index + 2}: runnable block is not closed")
        found.append((index + 3, "\n".join(body)))
    return found


def default_files():
    return [REPO / "README.md", *sorted((REPO / "docs" / "src").rglob("*.md"))]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", help="the jetson-detectd the blocks call")
    parser.add_argument("--list", action="store_true", help="list the blocks, run nothing")
    parser.add_argument("files", nargs="*", type=Path)
    args = parser.parse_args()
    files = [path.resolve() for path in args.files] or default_files()
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    binary = Path(args.binary or target / "debug" / "jetson-detectd").resolve()
    if not args.list and not os.access(binary, os.X_OK):
        raise SystemExit(f"docs/run-blocks.py: no binary at {binary}: run `cargo build` first (or pass --binary)")
    failures = 0
    count = 0
    with tempfile.TemporaryDirectory(prefix="run-blocks.") as scratch:
        bin_dir = Path(scratch) / "bin"
        bin_dir.mkdir()
        (bin_dir / "jetson-detectd").symlink_to(binary)
        env = dict(os.environ)
        env["PATH"] = f"{bin_dir}:{env.get('PATH', '/usr/bin:/bin')}"
        env["HOME"] = str(Path(scratch) / "home")
        env["XDG_CACHE_HOME"] = str(Path(scratch) / "cache")
        env.pop("CACHE_DIRECTORY", None)
        for path in files:
            for line, code in blocks(path):
                count += 1
                where = f"{path.relative_to(REPO) if REPO in path.parents else path}:{line}"
                if args.list:
                    print(f"{where}\n{code}\n")
                    continue
                try:
                    result = subprocess.run(
                        ["bash", "-c", "set -euo pipefail\n" + code],
                        cwd=REPO,
                        env=env,
                        capture_output=True,
                        text=True,
                        timeout=TIMEOUT_S,
                        check=False,
                    )
                    status, output = result.returncode, result.stdout + result.stderr
                except subprocess.TimeoutExpired as expired:
                    status, output = f"timed out after {TIMEOUT_S} s", str(expired.stdout or "") + str(expired.stderr or "")
                if status == 0:
                    print(f"ok   {where}")
                else:
                    failures += 1
                    print(f"FAIL {where} (exit {status})\n--- block\n{code}\n--- output\n{output.rstrip()}\n---")
    if not args.list:
        print(f"{count} runnable block(s), {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
