#!/usr/bin/env python3
"""Fails if the model of CF (Sources/RunLoopModel) could call CF.

The predict differential asks three rooms the same question: the model (the
predictor over a `LoopModel` snapshot), the engine (a real run) and plain CF
(CFOracle). The model is a room of its own only if it cannot reach CF, so:

- every file of the model imports only modules in MODEL_IMPORTS: no
  Foundation (on Linux it is built on CoreFoundation), no CoreFoundation, no
  Dispatch; FoundationEssentials, Swift's own Foundation core, holds no CF;
- the module it depends on, Primitives, imports only PRIMITIVES_IMPORTS, and
  the API's words Primitives re-exports (APIWords) only APIWORDS_IMPORTS;
- Package.swift gives RunLoopModel no dependency but Primitives;
- no code in the model (comments and string literals aside: its sentences
  name CF's functions) names a CF symbol (`CFRunLoop…`, `kCF…`).

Run by `make lint`.
"""
import os
import re
import sys

MODEL = "Sources/RunLoopModel"
MODEL_IMPORTS = {"FoundationEssentials", "Primitives", "Synchronization", "Glibc", "Musl"}
PRIMITIVES = "Sources/Primitives"
PRIMITIVES_IMPORTS = {"APIWords", "Dispatch", "HeapModule", "Synchronization", "Glibc", "Musl"}
APIWORDS = "Sources/APIWords"
APIWORDS_IMPORTS = set()
MODEL_DEPENDENCIES = ["Primitives"]

IMPORT = re.compile(r"^\s*(?:@\w+(?:\([^)]*\))?\s+)*import\s+(?:(?:typealias|struct|class|enum|protocol|let|var|func)\s+)?([A-Za-z_]\w*)")
CF_SYMBOL = re.compile(r"\b(?:CF[A-Z]\w*|kCF\w*|__CF\w*)")
STRING = re.compile(r'"(?:\\.|[^"\\])*"')


def swift_files(folder):
    for base, _, files in os.walk(folder):
        for name in sorted(files):
            if name.endswith(".swift"):
                yield os.path.join(base, name)


def code_of(line, in_block):
    """The line without its comments and string literals; whether a block comment is still open."""
    out = ""
    i = 0
    while i < len(line):
        if in_block:
            end = line.find("*/", i)
            if end < 0:
                return out, True
            i, in_block = end + 2, False
            continue
        if line.startswith("//", i):
            break
        if line.startswith("/*", i):
            in_block = True
            i += 2
            continue
        match = STRING.match(line, i) if line[i] == '"' else None
        if match:
            out += '""'
            i = match.end()
            continue
        out += line[i]
        i += 1
    return out, in_block


def check_imports(root, folder, allowed, problems):
    files = list(swift_files(os.path.join(root, folder)))
    for path in files:
        rel = os.path.relpath(path, root)
        in_block = False
        in_multiline_string = False
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if line.count('"""') % 2 == 1:
                    in_multiline_string = not in_multiline_string
                    continue
                if in_multiline_string:
                    continue
                code, in_block = code_of(line.rstrip("\n"), in_block)
                match = IMPORT.match(code)
                if match and match.group(1) not in allowed:
                    problems.append(f"{rel}:{number}: imports {match.group(1)} (allowed: {', '.join(sorted(allowed))})")
                if folder == MODEL:
                    symbol = CF_SYMBOL.search(code)
                    if symbol:
                        problems.append(f"{rel}:{number}: names {symbol.group(0)}: the model calls no CF")
    return len(files)


def check_manifest(root, problems):
    with open(os.path.join(root, "Package.swift"), encoding="utf-8") as f:
        text = f.read()
    match = re.search(r'\.target\(\s*name:\s*"RunLoopModel"\s*(?:,\s*dependencies:\s*\[([^\]]*)\])?', text)
    if not match:
        problems.append("Package.swift: no RunLoopModel target")
        return
    given = re.findall(r'"([^"]+)"', match.group(1) or "")
    if given != MODEL_DEPENDENCIES:
        problems.append(f"Package.swift: RunLoopModel depends on {given}, not only {MODEL_DEPENDENCIES}")


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    problems = []
    model = check_imports(root, MODEL, MODEL_IMPORTS, problems)
    check_imports(root, PRIMITIVES, PRIMITIVES_IMPORTS, problems)
    check_imports(root, APIWORDS, APIWORDS_IMPORTS, problems)
    check_manifest(root, problems)
    if model == 0:
        problems.append(f"{MODEL}: no Swift files")
    report = [f"model-imports: {p}" for p in problems] or [f"model-imports: {model} files of {MODEL}, none can reach CF"]
    print("\n".join(report), file=sys.stderr if problems else sys.stdout)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
