#!/usr/bin/env python3
"""Counts the library's non-test lines, as issue 32's closing notes count them.

A library line is a line of a `.rs` file under `fuel-graph-ext/` or
`fuel-collective/` (the runtime crate and fuel-opt included) before the
file's first `#[cfg(test)]`, leaving out `tests/`, `benches/` and
`examples/` folders and `tests.rs` files.

    scripts/library-lines.py                 # the working tree's count
    scripts/library-lines.py --at REV        # the count at a commit
    scripts/library-lines.py --since REV     # each first-parent commit after
                                             # REV: its change, then the total

Run it from the repository root. It only reads files (through `git show`
for commits) and writes nothing.
"""

import argparse
import os
import subprocess
import sys

ROOTS = ("fuel-graph-ext/", "fuel-collective/")
SKIPPED_DIRS = {"tests", "benches", "examples", "target", "proptest-regressions"}


def is_library(path):
    """Whether `path` (relative, `/`-separated) is a library source file."""
    if not path.endswith(".rs") or not path.startswith(ROOTS):
        return False
    parts = path.split("/")
    return parts[-1] != "tests.rs" and not SKIPPED_DIRS.intersection(parts[:-1])


def library_lines(text):
    """The lines of `text` before its first `#[cfg(test)]`."""
    n = 0
    for line in text.splitlines():
        if line.strip().startswith("#[cfg(test)]"):
            break
        n += 1
    return n


def git(*args):
    return subprocess.run(("git",) + args, capture_output=True, text=True, check=True).stdout


def at_commit(rev, path):
    """The library lines of `path` at `rev`; 0 where it does not exist."""
    r = subprocess.run(["git", "show", f"{rev}:{path}"], capture_output=True, text=True)
    return library_lines(r.stdout) if r.returncode == 0 else 0


def count_tree():
    total = 0
    for top in ROOTS:
        for d, _, files in os.walk(top):
            for f in files:
                p = os.path.join(d, f).replace(os.sep, "/")
                if is_library(p):
                    with open(p, encoding="utf-8") as fh:
                        total += library_lines(fh.read())
    return total


def count_rev(rev):
    files = git("ls-tree", "-r", "--name-only", rev).split()
    return sum(at_commit(rev, p) for p in files if is_library(p))


def since(base):
    total = count_rev(base)
    print(f"{total:>7} {base} (base)")
    for rev in git("rev-list", "--reverse", "--first-parent", f"{base}..HEAD").split():
        delta = 0
        for line in git("diff", "--name-status", f"{rev}^", rev).splitlines():
            for p in line.split("\t")[1:]:
                if is_library(p):
                    delta += at_commit(rev, p) - at_commit(f"{rev}^", p)
        total += delta
        subject = git("log", "-1", "--format=%h %s", rev).strip()
        print(f"{delta:>+7} {total:>7} {subject[:110]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--at", metavar="REV", help="count at a commit instead of the working tree")
    ap.add_argument("--since", metavar="REV", help="each first-parent commit after REV")
    a = ap.parse_args()
    if a.since:
        since(a.since)
    elif a.at:
        print(count_rev(a.at))
    else:
        print(count_tree())


if __name__ == "__main__":
    try:
        main()
    except subprocess.CalledProcessError as e:
        sys.exit(f"library-lines: git failed: {e.stderr.strip() or e}")
