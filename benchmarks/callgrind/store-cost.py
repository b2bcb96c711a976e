#!/usr/bin/env python3
"""Instructions per request the history store adds to perform echo +
waitUntilDone: runloopd with its default SQLite store (in a temporary
folder) against the same binary with --no-store, both under valgrind's
callgrind (issue 26). Every thread is counted, the store's writer included:
the slope over 400 and 2,000 requests cancels start-up and shutdown, and the
writer's last commit at SIGINT is inside both runs.

    python3 benchmarks/callgrind/store-cost.py BIN_DIR [--top N]

BIN_DIR: where the release runloopd is (benchmarks/.build). Prints the two
counts, the store's share, and the functions whose self instructions per
request grow most with the store on.
"""

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("per_request", os.path.join(here, "per-request.py"))
per_request = importlib.util.module_from_spec(spec)
spec.loader.exec_module(per_request)
SMALL, LARGE = per_request.SMALL, per_request.LARGE


def main():
    args = sys.argv[1:]
    if not args or not shutil.which("valgrind"):
        raise SystemExit(__doc__)
    top = int(args[args.index("--top") + 1]) if "--top" in args else 20
    public = os.path.join(here, "..", "..", "Public")
    with tempfile.TemporaryDirectory() as workdir:
        runloopd = os.path.join(workdir, "runloopd")
        release = subprocess.run(["find", args[0], "-name", "runloopd", "-type", "f", "-path", "*release*"],
                                 capture_output=True, text=True).stdout.split()
        shutil.copy(release[0] if release else os.path.join(args[0], "runloopd"), runloopd)
        subprocess.run(["strip", "-g", runloopd], check=True)
        sides = [
            ("--no-store", lambda p: [runloopd, "--port", str(p), "--log-level", "error", "--no-store",
                                      "--public-dir", public]),
            ("SQLite store on", lambda p: [runloopd, "--port", str(p), "--log-level", "error",
                                           "--public-dir", public]),
        ]
        per, costs = {}, {}
        for index, (name, argv) in enumerate(sides):
            small, small_out = per_request.measure(argv, "runloopd-perform", SMALL, workdir, f"s{index}")
            large, large_out = per_request.measure(argv, "runloopd-perform", LARGE, workdir, f"l{index}")
            per[name] = (large - small) / (LARGE - SMALL)
            a, b = per_request.self_costs(small_out), per_request.self_costs(large_out)
            costs[name] = {k: (b.get(k, 0) - a.get(k, 0)) / (LARGE - SMALL) for k in set(a) | set(b)}
            print(f"{per[name]:12,.0f}  instructions per request, {name}", flush=True)
        off, on = per["--no-store"], per["SQLite store on"]
        print(f"store on / off: {on / off:.3f}x instructions ({on - off:,.0f} more per request)")
        delta = sorted(((costs["SQLite store on"].get(k, 0) - costs["--no-store"].get(k, 0)), k)
                       for k in set(costs["SQLite store on"]) | set(costs["--no-store"]))
        print(f"\nFunctions that grow most with the store on (self instructions per request):\n")
        print("| more per request | function |\n|---|---|")
        for extra, fn in reversed(delta[-top:]):
            print(f"| {extra:,.0f} | `{per_request.demangled(fn)[:110]}` |")


if __name__ == "__main__":
    main()
