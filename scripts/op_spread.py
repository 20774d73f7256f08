#!/usr/bin/env python3
"""Where an operation is spelled out: the files of the plumbing that name it.

    scripts/op_spread.py CLASS.OP    print the files naming operation OP of CLASS
    scripts/op_spread.py OP          the same for every class that has an OP
    scripts/op_spread.py --check     run over every operation of the lists; exit 1 if
                                     one is named in more than two files
    scripts/op_spread.py --list      print the operations of the lists

Classes: ep (endpoint control, CM and data), pep, cq, eq, cntr, av, mr, wait, domain,
fabric, provider (e.g. `cq.readfrom`, `av.insertsvc`, `ep.tsendv`, `cntr.add`).

The plumbing is what carries an operation from the C ABI to a provider and back:
crates/core/src (the lists, the ABI tables, the adapters, the host wrappers, the
provider traits), crates/host/src, crates/hook/src (forwarders, fault replay) and
kit's data path (crates/kit/src/dataops.rs, lib.rs). Outside it: the providers that
implement an operation (crates/prov-*, crates/util-*, examples/vendor-provider,
kit's shared implementations and the hooks' provider, crates/hook/src/provider.rs),
and the callers (tests, benches, examples, the
conformance suite, the tools, the safe API of `ofi`).

A file names operation OP of a class when, outside comments and string literals, it
defines it (`fn OP`, a list entry), fills it in as a table slot (`OP: adapter::<F>`)
or forwards it (`.OP(` in an implementation of the class's trait or a hook type)
inside code about the class (a block whose header names one of the class's types),
or has the class's hand-written adapter `<prefix>_OP<F …>` (`<prefix>_OP<DomainOf>` in
an invocation of a macro that writes adapters). Names shared by several
classes (`read`, `wait_fd`, `close`) are so told apart.

--check covers every entry of `for_each_ep_data_op!` (abi/ops.rs, queries included)
and of the class lists of abi/ctl_ops.rs, `close` and `fn` entries included. The
operations in PENDING (whose hook forwarder still carries hook-specific logic written
by hand) are reported, not failed; one of them that comes within the limit fails the
check until it leaves PENDING, so the list only shrinks.

Exit status: 0 ok, 1 an operation over the limit, 2 usage error.
"""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLUMBING = [
    "crates/core/src",
    "crates/host/src",
    "crates/hook/src",
    "crates/kit/src/lib.rs",
    "crates/kit/src/dataops.rs",
]
LISTS = ["crates/core/src/abi/ops.rs", "crates/core/src/abi/ctl_ops.rs"]
LIMIT = 2
# Over the limit, pieces written by hand: none today (the last two, `ep.bind` and
# `mr.bind`, have their hook forwarders generated since the hook's impls are generic
# over its family, `F: HookFamily<H>`, and so spell `BindTarget<'_, F>` as the list).
PENDING = set()

# The words that say which object class a piece of code is about: its ops tables, its
# provider trait and type alias, its public type, its hook types, and the prefix of
# its hand-written adapters (`cq_readfrom`).
CLASSES = {
    "ep": dict(
        words="MsgTable TaggedTable RmaTable AtomicTable EpTable CmTable EndpointOps "
        "EpOf Endpoint HookEp EpCore queries",
        prefixes="ep at",
    ),
    "pep": dict(words="PepTable PassiveEndpointOps PassiveEndpoint HookPep", prefixes="pep"),
    "cq": dict(words="CqTable CqOps CqOf CompletionQueue HookCq CqCore CqBox", prefixes="cq"),
    "eq": dict(words="EqTable EqOps EqOf EventQueue HookEq EqBox", prefixes="eq"),
    "cntr": dict(words="CntrTable CntrOps CntrOf Counter HookCntr CntrCore", prefixes="cntr"),
    "av": dict(words="AvTable AvOps AvOf AddressVector HookAv", prefixes="av"),
    "mr": dict(words="MrTable MrOps MrOf MemoryRegion HookMr", prefixes="mr"),
    "wait": dict(words="WaitTable WaitOps WaitOf WaitSet HookWait", prefixes="wait"),
    "domain": dict(words="DomainTable DomainOps Domain HookDomain", prefixes="dom"),
    "fabric": dict(words="FabricTable FabricOps Fabric HookFabric", prefixes="fab"),
    "provider": dict(
        words="ProviderTable ProvAdapt Provider ProviderHandle", prefixes="prov"
    ),
}
# The groups of the list of data operations, and the CM list, are the endpoint's.
GROUP_CLASS = {"msg": "ep", "tagged": "ep", "rma": "ep", "atomic": "ep", "cm": "ep"}

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


# Inside the plumbing, files that implement operations as a provider does: the hook
# crate's provider (`HookProvider`, the root table every hook registers with).
IMPLEMENTATIONS = {"crates/hook/src/provider.rs"}


def plumbing_files():
    for top in PLUMBING:
        for d, _, files in os.walk(os.path.join(ROOT, top)):
            for f in sorted(files):
                path = os.path.relpath(os.path.join(d, f), ROOT)
                if f.endswith(".rs") and path not in IMPLEMENTATIONS:
                    yield path


_CACHE = {}


def code_of(path):
    if path not in _CACHE:
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            _CACHE[path] = strip_comments_and_strings(f.read())
    return _CACHE[path]


def blocks(code):
    """For each `{`, the words of its header (the text since the previous `;`, `{` or
    `}`), as a list of (open, close, header words)."""
    out, stack, last = [], [], 0
    for i, c in enumerate(code):
        if c == "{":
            stack.append((i, set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", code[last:i]))))
            last = i + 1
        elif c == "}":
            if stack:
                start, words = stack.pop()
                out.append((start, i, words))
            last = i + 1
        elif c == ";":
            last = i + 1
    return out


_BLOCKS = {}


def is_forwarding(words):
    """A block header of an implementation of a provider trait or of a hook type:
    where calling an operation spells it out (a forwarder), rather than uses it."""
    return any(w.endswith("Ops") or w.startswith("Hook") for w in words)


def class_at(path, pos, calls_only=False):
    """The classes the innermost block around `pos` whose header names a class is
    about (empty outside any; with `calls_only`, only a forwarding block counts)."""
    if path not in _BLOCKS:
        _BLOCKS[path] = sorted(blocks(code_of(path)), key=lambda b: b[1] - b[0])
    for start, end, words in _BLOCKS[path]:
        if start < pos < end:
            found = {c for c, v in CLASSES.items() if words & set(v["words"].split())}
            if found:
                return found if not calls_only or is_forwarding(words) else set()
    return set()


def op_uses(code, op):
    """Positions where `op` is used as an operation: defined (`fn op`, a list's
    `op op(` or `op / host / Variant`), called as a method (`.op(`), or filled in as a
    table slot (`op: adapter::<F>`), or a list's keyword entry (`close;`)."""
    o = re.escape(op)
    pat = re.compile(
        r"(?:\bfn\s+(?:@\d+\s+)?|\bop\s+)(" + o + r")\b(?=\s*[(<])"
        r"|(?<![A-Za-z0-9_.])(" + o + r")(?=\s*:\s*[A-Za-z0-9_:]*::<)"
        r"|^\s*(" + o + r")(?=\s*/\s*\w+\s*[/;])"
        r"|/\s*(" + o + r")(?=\s*;)"
        r"|\.\s*(" + o + r")(?=\s*\()"
        r"|^\s*(" + o + r")(?=\s*;\s*$)",
        re.M,
    )
    # (position, is a method call)
    return [(m.start(m.lastindex), m.lastindex == 5) for m in pat.finditer(code)]


def files_naming(op, cls=None):
    """The plumbing files naming `op` (of class `cls`: used as an operation inside
    code about that class, or as the class's hand-written adapter
    `<prefix>_<op><F …>`; as any identifier when `cls` is None)."""
    word = re.compile(r"(?<![A-Za-z0-9_])" + re.escape(op) + r"(?![A-Za-z0-9_])")
    hits = []
    for p in plumbing_files():
        code = code_of(p)
        if cls is None:
            if word.search(code):
                hits.append(p)
            continue
        pre = "|".join(CLASSES[cls]["prefixes"].split())
        adapter = re.compile(
            r"(?<![A-Za-z0-9_])(?:" + pre + r")_" + re.escape(op) + r"\s*(?:::)?\s*<\s*(?:[FP]|\w+Of)\b"
        )
        if adapter.search(code) or any(
            cls in class_at(p, pos, call) for pos, call in op_uses(code, op)
        ):
            hits.append(p)
    return sorted(hits)


# The forms of a list's entry lines: (pattern, the groups that name the operation,
# whether its plumbing is generated).
ENTRY_FORMS = [
    # A data operation (`name / host / Variant`): its C name.
    (r"\s*(\w+) / (\w+) / (\w+)", (1,), True),
    # A query: its slot and its method are two names of one operation.
    (r"\s*(\w+) / (\w+);", (1, 2), True),
    # A `close` entry: the class's generic close.
    (r"\s*(close);\s*$", (1,), True),
    (r"\s*op (\w+)\(", (1,), True),
    # A `fn` entry, written by hand.
    (r"\s*fn (?:@\d+ )?(\w+)\(", (1,), False),
]


def list_ops():
    """(class, name, generated) of every entry of the lists: the data operations and
    queries of `for_each_ep_data_op!`, and every class list of `abi/ctl_ops.rs`
    (`fn` entries are written by hand: generated = False)."""
    ops = []
    for path in LISTS:
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            text = strip_comments_and_strings(f.read())
        for m in re.finditer(r"macro_rules! for_each_\w+_op \{", text):
            depth, end = 1, m.end()
            while depth and end < len(text):
                depth += {"{": 1, "}": -1}.get(text[end], 0)
                end += 1
            body = text[m.end():end]
            cls = None
            for line in body.splitlines():
                g = re.match(r"\s*(?:\}\s*)?(?:\+ queries \{\s*)?(\w+) (\w+Table) ", line)
                if g:
                    cls = GROUP_CLASS.get(g.group(1), g.group(1))
                    continue
                for pattern, names, generated in ENTRY_FORMS:
                    entry = re.match(pattern, line)
                    if entry:
                        ops.extend((cls, entry.group(k), generated) for k in names)
                        break
    return ops


def main(argv):
    args = argv[1:]
    if args == ["--list"]:
        for cls, name, generated in list_ops():
            print(f"{cls} {name}{'' if generated else ' (by hand)'}")
        return 0
    if args == ["--check"]:
        over, pending, stale, worst, checked = [], [], [], 0, 0
        ops = list_ops()
        for cls, name, _generated in ops:
            key = f"{cls}.{name}"
            files = files_naming(name, cls)
            if key in PENDING:
                (pending if len(files) > LIMIT else stale).append(key)
                continue
            checked += 1
            worst = max(worst, len(files))
            if len(files) > LIMIT:
                over.append((cls, name, files))
        for cls, name, files in over:
            print(f"{cls} {name}: {len(files)} files (limit {LIMIT})")
            for f in files:
                print(f"    {f}")
        for key in stale:
            print(f"{key}: within the limit now; remove it from PENDING")
        print(
            f"{len(ops)} operations, {checked} checked "
            f"(at most {worst} files each), {len(over)} over the limit; "
            f"pending (over the limit, pieces by hand): {' '.join(pending) or '-'}"
        )
        return 1 if over or stale else 0
    if len(args) == 1 and "." in args[0]:
        args = args[0].split(".", 1)
    if len(args) == 2:
        # A group of the lists names its class (`rma.read`, `cm.getname`: the endpoint's).
        args[0] = GROUP_CLASS.get(args[0], args[0])
    if len(args) == 2 and args[0] in CLASSES:
        for f in files_naming(args[1], args[0]):
            print(f)
        return 0
    if len(args) == 1 and not args[0].startswith("-"):
        shown = False
        for cls in CLASSES:
            files = files_naming(args[0], cls)
            if files:
                shown = True
                print(f"{cls}:")
                for f in files:
                    print(f"    {f}")
        if not shown:
            print("(named nowhere in code about an object class)")
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
