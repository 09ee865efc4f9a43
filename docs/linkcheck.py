#!/usr/bin/env python3
"""Checks every relative link of the book and of README.md, without the network.

  python3 docs/linkcheck.py [--html DIR]

- Every relative link `[text](path)` or `[text](path#anchor)` in docs/src/**/*.md must name a file
  that exists under docs/src (the book is published on its own, so a link out of it would break:
  name repository files as `code`, not as links), and every docs/src page must be listed in
  docs/src/SUMMARY.md.
- Every `#anchor` must be an id of the target page as mdBook renders it: the ids are read from the
  built HTML (--html, default docs/book/html or docs/book, as `mdbook build docs` leaves it), so the
  check follows mdBook's own heading-id rules. Run it after `mdbook build docs`.
- README.md's relative links must name files that exist in the repository (anchors there are
  GitHub's business and are not checked).
Links with a scheme (https:, mailto:) are not followed. Exit status 1 with a list of broken links.
"""

import argparse
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / "docs" / "src"
LINK = re.compile(r"(?<!\!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")
ID = re.compile(r'\sid="([^"]+)"')


def links(path):
    """(line number, target) of every Markdown link outside code blocks and inline code."""
    found = []
    fenced = False
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        text = re.sub(r"`[^`]*`", "", line)
        for match in LINK.finditer(text):
            found.append((number, match.group(1)))
        for match in IMAGE.finditer(text):
            found.append((number, match.group(1)))
    return found


def html_ids(html_root, page):
    html = html_root / page.relative_to(SRC).with_suffix(".html")
    if page.name in ("README.md", "index.md") and not html.exists():
        html = html.with_name("index.html")
    if not html.exists():
        return None
    return set(ID.findall(html.read_text()))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--html", type=Path, help="mdBook's HTML output (default: docs/book/html or docs/book)")
    args = parser.parse_args()
    html_root = args.html
    if html_root is None:
        html_root = REPO / "docs" / "book" / "html"
        if not html_root.exists():
            html_root = REPO / "docs" / "book"
    if not (html_root / "index.html").exists():
        raise SystemExit(f"docs/linkcheck.py: no built book at {html_root}: run `mdbook build docs` first")

    problems = []
    pages = sorted(SRC.rglob("*.md"))
    listed = {target.split("#")[0] for _, target in links(SRC / "SUMMARY.md")}
    for page in pages:
        name = str(page.relative_to(SRC))
        if name != "SUMMARY.md" and name not in listed:
            problems.append(f"docs/src/{name}: not listed in SUMMARY.md")

    ids_cache = {}
    checked = 0
    for page in pages:
        for number, target in links(page):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue
            checked += 1
            where = f"{page.relative_to(REPO)}:{number}"
            path_part, _, anchor = target.partition("#")
            destination = (page.parent / path_part).resolve() if path_part else page
            if not destination.is_file():
                problems.append(f"{where}: {target}: no such file")
                continue
            if SRC.resolve() not in destination.parents:
                problems.append(f"{where}: {target}: leaves the book (name repository files as `code`)")
                continue
            if anchor:
                if destination not in ids_cache:
                    ids_cache[destination] = html_ids(html_root, destination)
                ids = ids_cache[destination]
                if ids is None:
                    problems.append(f"{where}: {target}: page not in the built book")
                elif anchor not in ids:
                    problems.append(f"{where}: {target}: no heading with id `{anchor}`")

    readme = REPO / "README.md"
    for number, target in links(readme):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue
        checked += 1
        path_part = target.partition("#")[0]
        if not (REPO / path_part).exists():
            problems.append(f"README.md:{number}: {target}: no such file")

    for problem in problems:
        print(problem)
    print(f"{checked} relative link(s) checked, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
