#!/usr/bin/env python3
"""Function hops and lock acquisitions per request under valgrind's callgrind,
for `GET /api/version` and `POST /api/threads/{id}/perform` (echo,
waitUntilDone): the counts ARCHITECTURE.md's request walk gives.

    python3 benchmarks/callgrind/hops.py RUNLOOPD_BINARY [extra runloopd flags...] [--verbose]
    python3 benchmarks/callgrind/hops.py benchmarks/.build/minimal-hop      (the C baseline, 1 and 2 loops)

Each request kind runs under callgrind twice (400 and 2,000 requests on one
keep-alive connection, runloopd with `--log-level error --no-store`); the
difference over the 1,600 extra requests is the count per request, start-up
and shutdown cancelled out, every thread included. From the call graph:

- hops: calls into runloopd's own functions (symbols of the modules
  MicroHTTP, RunLoopServer, RunLoopCore, Primitives), i.e. the functions a
  request passes through that the release build did not inline;
- locks: calls of `pthread_mutex_lock`, split by who takes the lock: runloopd
  (a `Locked` whose `withLock` was inlined into a runloopd function), CF
  (CoreFoundation's run loop and sources), libmicrohttpd, other (libdispatch,
  the Swift runtime).

A release binary's DWARF 5 is beyond valgrind 3.19, so a copy with its debug
info stripped (symbols kept) is measured.
"""

import collections
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile

SMALL, LARGE = 400, 2000
OBJECT_OF = {}  # function -> the object it is in (for unnamed static functions)
OURS = re.compile(r"^_?\$s(9MicroHTTP|13RunLoopServer|11RunLoopCore|10Primitives)")


def per_request_module():
    """benchmarks/callgrind/per-request.py, whose `measure` runs a server under callgrind."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "per-request.py")
    spec = importlib.util.spec_from_file_location("per_request", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(binary, extra, kind, count, workdir):
    """One callgrind file of `count` requests of `kind` (get or perform), names uncompressed."""
    public = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "Public")
    if os.path.basename(binary).startswith("minimal-hop"):
        # The C baseline: 1 loop for GET, 2 for the perform POST.
        loops, size = ("1", "120") if kind == "get" else ("2", "200")
        argv, kind = (lambda port: [binary, str(port), loops, size]), ("get" if kind == "get" else "post")
    else:
        argv = lambda port: [binary, "--port", str(port), "--log-level", "error", "--no-store", "--public-dir", public] + extra
        kind = "runloopd-get" if kind == "get" else "runloopd-perform"
    _, out = PER_REQUEST.measure(argv, kind, count, workdir, kind, ("--compress-strings=no", "--compress-pos=no"))
    return out


def calls(path):
    """(caller, callee) -> calls and object -> self instructions, from a
    callgrind file written without string or position compression."""
    edges = collections.Counter()
    objects = collections.Counter()
    functions = collections.Counter()
    caller = callee = None
    obj = "?"
    after_call = False
    for line in open(path, errors="replace"):
        if line.startswith("ob="):
            obj = os.path.basename(line[3:].strip())
        elif line.startswith("fn="):
            caller = line[3:].strip()
            OBJECT_OF.setdefault(caller, obj)
        elif line.startswith("cfn="):
            callee = line[4:].strip()
        elif line.startswith("calls=") and caller and callee:
            edges[(caller, callee)] += int(line[6:].split()[0])
            after_call = True
        elif line[:1].isdigit():
            if after_call:
                after_call = False  # the call's inclusive cost, not this function's own
            else:
                cost = int(line.split()[-1])
                objects[part(obj, caller or "")] += cost
                functions[caller or "?"] += cost
    return edges, objects, functions


def part(obj, function):
    """Whose code an instruction is: the design's (libmicrohttpd, CoreFoundation,
    the kernel's memset of MHD's pool) or runloopd's (its Swift modules, and the
    Swift runtime and library it calls), by object and symbol."""
    if obj.startswith("libmicrohttpd"):
        return "libmicrohttpd"
    if obj.startswith("libc"):
        return "libc memset (MHD's connection pool)" if "memset" in function else "libc (malloc, free, ...)"
    if OURS.match(function):
        return "runloopd's Swift"
    if function.startswith(("CF", "_CF", "__CF", "__CFRunLoop")):
        return "CoreFoundation"
    if function.startswith(("swift_", "$ss", "_$ss", "$sS", "swift::", "bool swift::", "void swift::")):
        return "Swift runtime and library"
    if function.startswith(("$s10Foundation", "_$s10Foundation")):
        return "Foundation"
    if function.startswith(("$s7Logging", "$s15Synchronization", "$s12DequeModule", "$s11HeapModule")):
        return "Swift packages"
    return "other (" + obj + ")"


def owner(symbol):
    if OBJECT_OF.get(symbol, "").startswith("libmicrohttpd") or symbol.startswith("MHD_"):
        return "libmicrohttpd"
    if OURS.match(symbol):
        return "runloopd"
    if symbol.startswith(("CF", "_CF", "__CF")):
        return "CF"
    return "other"


def per_request(small, large):
    (a, objects_a, self_a), (b, objects_b, self_b) = calls(small), calls(large)
    selfs = {k: (self_b.get(k, 0) - self_a.get(k, 0)) / (LARGE - SMALL) for k in self_b}
    delta = {k: (b.get(k, 0) - a.get(k, 0)) / (LARGE - SMALL) for k in set(a) | set(b)}
    objects = {k: (objects_b.get(k, 0) - objects_a.get(k, 0)) / (LARGE - SMALL) for k in objects_b}
    hops = sum(v for (_, callee), v in delta.items() if OURS.match(callee))
    locks = collections.Counter()
    for (caller, callee), v in delta.items():
        if callee.startswith("pthread_mutex_lock"):
            locks[owner(caller)] += v
    top = sorted(((v, callee) for (_, callee), v in delta.items() if OURS.match(callee) and v >= 0.5), reverse=True)
    merged = collections.Counter()
    for v, callee in top:
        merged[callee] += v
    lockers = collections.Counter()
    for (caller, callee), v in delta.items():
        if callee.startswith("pthread_mutex_lock") and v >= 0.5:
            lockers[f"[{owner(caller)}] {caller}"] += v
    return hops, locks, merged, lockers, objects, selfs


def demangle(names):
    swift = shutil.which("swift") or "/opt/swift/usr/bin/swift"
    if not os.path.exists(swift):
        return names
    out = subprocess.run([swift, "demangle", "--simplified", "--compact"], input="\n".join(names),
                         capture_output=True, text=True).stdout.splitlines()
    return out if len(out) == len(names) else names


PER_REQUEST = per_request_module()


def main():
    if len(sys.argv) < 2 or not shutil.which("valgrind"):
        raise SystemExit(__doc__)
    verbose = "--verbose" in sys.argv
    extra = [a for a in sys.argv[2:] if a != "--verbose"]
    with tempfile.TemporaryDirectory() as workdir:
        binary = os.path.join(workdir, os.path.basename(sys.argv[1]))
        shutil.copy(sys.argv[1], binary)
        subprocess.run(["strip", "-g", binary], check=True)
        for kind in ("get", "perform"):
            small = run(binary, extra, kind, SMALL, workdir)
            large = run(binary, extra, kind, LARGE, workdir)
            hops, locks, functions, lockers, objects, selfs = per_request(small, large)
            name = "GET /api/version" if kind == "get" else "POST perform echo, waitUntilDone"
            split = ", ".join(f"{k} {locks[k]:.1f}" for k in ("runloopd", "CF", "libmicrohttpd", "other"))
            print(f"{name}: {hops:.1f} calls into runloopd's functions; "
                  f"{sum(locks.values()):.1f} pthread_mutex_lock ({split})", flush=True)
            shown = sorted(((v, k) for k, v in objects.items() if abs(v) >= 100), reverse=True)
            print("  instructions by object: " + ", ".join(f"{k} {v:,.0f}" for v, k in shown), flush=True)
            if verbose:
                keys = [k for k, _ in functions.most_common()]
                for key, text in zip(keys, demangle(keys)):
                    print(f"   {functions[key]:6.1f}  {text[:150]}")
                print("  top functions by own instructions:")
                top = sorted(((v, k) for k, v in selfs.items()), reverse=True)[:40]
                for (v, key), text in zip(top, demangle([k for _, k in top])):
                    print(f"   {v:8,.0f}  [{part('', key)}] {text[:140]}")
                print("  lock takers:")
                keys = [k for k, _ in lockers.most_common()]
                for key, text in zip(keys, demangle(keys)):
                    print(f"   {lockers[key]:6.1f}  {text[:150]}")


if __name__ == "__main__":
    main()
