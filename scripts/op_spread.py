#!/usr/bin/env python3
"""Where an operation is spelled out: the files of the plumbing that name it.

    scripts/op_spread.py OPNAME      print the files naming OPNAME as an identifier
    scripts/op_spread.py --check     run over every operation of the lists of
                                     operations; exit 1 if one is named in more than
                                     two files
    scripts/op_spread.py --list      print the operations of the lists

The plumbing is what carries an operation from the C ABI to a provider and back:
crates/core/src (the lists, the ABI tables, the adapters, the host wrappers, the
provider traits), crates/host/src, crates/hook/src (forwarders, fault replay) and
crates/kit/src (kit's data path). Outside it: the providers that implement an
operation (crates/prov-*, crates/util-*, examples/vendor-provider), and the callers
(tests, benches, examples, the conformance suite, the tools, the safe API of `ofi`).

"Naming as an identifier": the whole word, outside comments and string literals.

The operations checked are those of the lists in crates/core/src/abi/ops.rs (the
entries and the queries of `for_each_ep_data_op!`). A name that is also an ordinary
identifier of the plumbing for something else (`read`, `write`, `send`, ...) cannot
be told apart by its spelling; --check reports those as ambiguous and does not count
them (their one declaration is still the list's).

Exit status: 0 ok, 1 an operation over the limit, 2 usage error.
"""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLUMBING = ["crates/core/src", "crates/host/src", "crates/hook/src", "crates/kit/src"]
OPS_FILE = "crates/core/src/abi/ops.rs"
LIMIT = 2

# Names that the plumbing also uses for unrelated things (CQ/EQ/counter reads, std
# I/O, wire frames, atomics of std::sync, ...): their spelling alone says nothing.
AMBIGUOUS = {"read", "write", "send", "recv", "inject", "atomic"}


def strip_comments_and_strings(text):
    """Rust source without comments, string and char literals (kept as blanks)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and (
            i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")
        ):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            end = text.find('"' + hashes, i + 2 + len(hashes))
            i = n if end < 0 else end + 1 + len(hashes)
            out.append(" ")
        elif c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
            out.append(" ")
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:i + 4]):
            m = re.match(r"'(\\[^']*|[^\\'])'", text[i:])
            i += len(m.group(0)) if m else 1
            out.append(" ")
        else:
            out.append(c)
            i += 1
    return "".join(out)


def plumbing_files():
    for top in PLUMBING:
        for d, _, files in os.walk(os.path.join(ROOT, top)):
            for f in sorted(files):
                if f.endswith(".rs"):
                    yield os.path.relpath(os.path.join(d, f), ROOT)


_CACHE = {}


def code_of(path):
    if path not in _CACHE:
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            _CACHE[path] = strip_comments_and_strings(f.read())
    return _CACHE[path]


def files_naming(op):
    word = re.compile(r"(?<![A-Za-z0-9_])" + re.escape(op) + r"(?![A-Za-z0-9_])")
    return sorted(p for p in plumbing_files() if word.search(code_of(p)))


def list_ops():
    """(group, name) of every entry and query of the lists in ops.rs."""
    with open(os.path.join(ROOT, OPS_FILE), encoding="utf-8") as f:
        text = f.read()
    start = text.index("macro_rules! for_each_ep_data_op")
    body = strip_comments_and_strings(text[start:])
    ops = []
    group = None
    for line in body.splitlines():
        g = re.match(r"\s*(?:\}\s*)?(\w+) (\w+Table) \{", line)
        if g:
            group = g.group(1)
            continue
        e = re.match(r"\s*(\w+) / (\w+) / (\w+)", line)
        if e:
            ops.append((group, e.group(1)))
            continue
        q = re.match(r"\s*(\w+) / (\w+);", line)
        if q:
            # A query: its slot and its method are two names of one operation.
            ops.append((group, q.group(1)))
            ops.append((group, q.group(2)))
    return ops


def main(argv):
    if len(argv) == 2 and argv[1] == "--list":
        for group, name in list_ops():
            print(f"{group} {name}")
        return 0
    if len(argv) == 2 and argv[1] == "--check":
        over, ambiguous, worst = [], [], 0
        ops = list_ops()
        for group, name in ops:
            if name in AMBIGUOUS:
                ambiguous.append(name)
                continue
            files = files_naming(name)
            worst = max(worst, len(files))
            if len(files) > LIMIT:
                over.append((group, name, files))
        for group, name, files in over:
            print(f"{group} {name}: {len(files)} files (limit {LIMIT})")
            for f in files:
                print(f"    {f}")
        print(
            f"{len(ops)} operations, {len(ops) - len(ambiguous)} checked "
            f"(at most {worst} files each), {len(over)} over the limit; "
            f"ambiguous names not counted: {' '.join(sorted(set(ambiguous))) or '-'}"
        )
        return 1 if over else 0
    if len(argv) == 2 and not argv[1].startswith("-"):
        for f in files_naming(argv[1]):
            print(f)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
