#!/usr/bin/env python3
"""Fails naming every hand-written source over the size bound (400 lines).

Hand-written sources: the Swift of Sources/ and Tests/ (and of the
benchmarks' package), the dashboard's JavaScript (Public/), the Python of
the tests and their helpers (Tests/), the scripts and the benchmarks, as git
sees them: tracked, or new and not ignored
(generated code is never in git).
A file over the bound is split along a seam (an extension or a module named
for what it holds). KNOWN lists the files allowed over it for now, each with
why; one that has come under the bound is reported, to be taken off the list.
Run by `make lint`.
"""
import os
import subprocess
import sys

BOUND = 400

# Over the bound while another piece of work splits them (issue 41).
KNOWN = {
}


def hand_written(path):
    if path.endswith(".swift"):
        return path.startswith(("Sources/", "Tests/", "benchmarks/Sources/"))
    if path.endswith(".js") or path.endswith(".mjs"):
        return path.startswith("Public/")
    if path.endswith(".py"):
        return path.startswith(("Tests/", "scripts/", "benchmarks/"))
    return False


def tracked(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             capture_output=True, check=True).stdout
        return [p for p in out.decode().split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        found = []
        for folder, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            found += [os.path.relpath(os.path.join(folder, f), root) for f in files]
        return found


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    over, known_over = [], set()
    checked = 0
    for path in sorted(tracked(root)):
        full = os.path.join(root, path)
        if not hand_written(path) or not os.path.isfile(full):
            continue
        checked += 1
        with open(full, encoding="utf-8", errors="replace") as f:
            lines = sum(1 for _ in f)
        if lines <= BOUND:
            continue
        if path in KNOWN:
            known_over.add(path)
            print(f"source-sizes: {path}: {lines} lines (known: {KNOWN[path]})")
        else:
            over.append((path, lines))
    for path in sorted(set(KNOWN) - known_over):
        print(f"source-sizes: {path} is no longer over {BOUND} lines: take it off KNOWN in {sys.argv[0]}")
    for path, lines in over:
        print(f"source-sizes: {path}: {lines} lines, over {BOUND}: split it along a seam", file=sys.stderr)
    if over:
        return 1
    print(f"source-sizes: {checked} hand-written sources, none over {BOUND} lines but the known ones")
    return 0


if __name__ == "__main__":
    sys.exit(main())
