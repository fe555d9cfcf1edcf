#!/usr/bin/env python3
"""Fails when a function in the given Rust files or folders is MAX lines or more (default 100),
signature to closing brace. CI keeps the transport, the annotation crate and fit's setup in
functions a reader takes in at once.

    scripts/ci/function_lengths.py [--max 100] PATH ...
"""
import argparse
import re
import sys
from pathlib import Path

FN = re.compile(r"^(\s*)(?:pub(?:\([a-z]+\))? )?(?:async )?(?:unsafe )?fn (\w+)")


def long_functions(path, limit):
    lines = path.read_text(encoding="utf-8").split("\n")
    for number, line in enumerate(lines):
        match = FN.match(line)
        if not match or line.rstrip().endswith(";"):
            continue
        indent = match.group(1)
        for end in range(number + 1, len(lines)):
            if lines[end] == indent + "}":
                if end - number + 1 >= limit:
                    yield number + 1, match.group(2), end - number + 1
                break


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max", type=int, default=100)
    parser.add_argument("paths", nargs="+", type=Path)
    args = parser.parse_args()
    files = [f for p in args.paths for f in ([p] if p.is_file() else sorted(p.rglob("*.rs")))]
    found = [(f, *long) for f in files for long in long_functions(f, args.max)]
    for file, line, name, length in found:
        print(f"{file}:{line}: fn {name} is {length} lines; at most {args.max - 1}", file=sys.stderr)
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
