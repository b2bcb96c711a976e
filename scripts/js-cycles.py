#!/usr/bin/env python3
"""Fails on an import cycle among the dashboard's ES modules (Public/js).

Reads every static `import ... from '...'` and `export ... from '...'` of the
modules under the given folder (default Public/js), resolves relative paths,
and prints each cycle (a -> b -> a) it finds, exiting 1; exits 0 when the
module graph is acyclic. Dynamic `import()` is not an edge: it does not run
while the importer is being evaluated. Run by `make lint`.
"""
import os
import re
import sys

STATIC = re.compile(
    r"""^\s*(?:import|export)\s+(?:[^'";]*?\s+from\s+)?['"]([^'"]+)['"]""",
    re.MULTILINE | re.DOTALL,
)
COMMENTS = re.compile(r"/\*.*?\*/|//[^\n]*", re.DOTALL)


def imports(path):
    text = COMMENTS.sub("", open(path, encoding="utf-8").read())
    base = os.path.dirname(path)
    found = []
    for target in STATIC.findall(text):
        if target.startswith("."):
            found.append(os.path.normpath(os.path.join(base, target)))
    return found


def graph(root):
    nodes = {}
    for folder, _, files in os.walk(root):
        for name in sorted(files):
            if name.endswith(".js") or name.endswith(".mjs"):
                path = os.path.normpath(os.path.join(folder, name))
                nodes[path] = imports(path)
    return nodes


def cycles(nodes):
    """Every elementary cycle found by a depth-first search, each once (rotated to its smallest node)."""
    seen = set()
    found = []
    state = {}

    def visit(node, stack):
        state[node] = "open"
        stack.append(node)
        for nxt in nodes.get(node, []):
            if nxt not in nodes:
                continue
            if state.get(nxt) == "open":
                cycle = stack[stack.index(nxt):]
                low = cycle.index(min(cycle))
                key = tuple(cycle[low:] + cycle[:low])
                if key not in seen:
                    seen.add(key)
                    found.append(list(key))
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = "done"

    for node in sorted(nodes):
        if node not in state:
            visit(node, [])
    return found


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "Public/js"
    nodes = graph(root)
    if not nodes:
        print(f"js-cycles: no modules under {root}", file=sys.stderr)
        return 2
    missing = [(a, b) for a, targets in nodes.items() for b in targets if b not in nodes]
    for a, b in missing:
        print(f"js-cycles: {a} imports {b}, which is not there", file=sys.stderr)
    found = cycles(nodes)
    for cycle in found:
        names = [os.path.basename(p) for p in cycle]
        print("js-cycles: import cycle: " + " -> ".join(names + names[:1]), file=sys.stderr)
    if found or missing:
        return 1
    print(f"js-cycles: {len(nodes)} modules, no import cycle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
