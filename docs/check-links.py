#!/usr/bin/env python3
"""Checks that every relative link in the given Markdown files resolves.

A link [text](path#anchor) must name an existing file or folder, relative to the file it is in;
an anchor into a Markdown file must match one of its headings (GitHub's slugs). Code spans
naming a path under docs/runs/ must exist too, except in docs/history/, whose sections name
runs that were removed from the tree on purpose (docs/history/README.md says where they are).

    python3 docs/check-links.py README.md BENCHMARKS.md kernels/NOTES.md docs/*.md docs/history/*.md

Exits 1 and lists the broken links when there are any.
"""
import os
import re
import sys

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
REF = re.compile(r"^\s*\[[^\]]+\]:\s*(\S+)", re.M)
CODE_RUN = re.compile(r"`(docs/runs/[^`\s]+)`")


def slug(heading):
    text = re.sub(r"`", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    found = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"^#+\s+(.*)$", line)
            if m:
                found.add(slug(m.group(1)))
    return found


def check(md):
    broken = []
    text = open(md, encoding="utf-8").read()
    base = os.path.dirname(md)
    targets = LINK.findall(text) + REF.findall(text)
    for target in targets:
        if re.match(r"^[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        full = os.path.normpath(os.path.join(base, path)) if path else md
        if not os.path.exists(full):
            broken.append(f"{md}: {target} (no such file)")
        elif anchor and full.endswith(".md") and anchor not in anchors(full):
            broken.append(f"{md}: {target} (no such heading)")
    if "docs/history/" not in md.replace(os.sep, "/"):
        for path in CODE_RUN.findall(text):
            if not os.path.exists(path):
                broken.append(f"{md}: `{path}` (no such file)")
    return broken, len(targets)


def main(files):
    broken, count = [], 0
    for md in files:
        b, n = check(md)
        broken += b
        count += n
    for line in broken:
        print(line)
    print(f"{count} links in {len(files)} files, {len(broken)} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
