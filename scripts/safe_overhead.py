#!/usr/bin/env python3
"""What the safe layer costs per shm round trip, averaged over copies of the executable.

The `safe_overhead` bench (crates/ofi/benches) reports, per run, the median over its rounds of
(safe mean - raw mean) for one 64 B ping-pong. Something that comes with each copy of
the executable (most likely where its pages land in memory) moves that figure by
several ns from one byte-identical copy of the binary to another (docs/PERFORMANCE.md,
"Safe layer overhead"), so one binary cannot tell a 2 ns change from luck. This script copies each given build several times into a temporary
directory, runs every copy in the normal mode and with `--aa` (the second mode is then a
twin of the raw loop: the method's own offset), interleaved run by run, and prints per
build and mode each copy's median and the median and mean over copies, and the safe
figure less the A/A one (the steadier number: a batch's A/A moves with the minutes, and
the safe figure with it). The copies are removed at the end; every run has a time limit.

Usage: scripts/safe_overhead.py [--copies 4] [--runs 10] [--iters 20000] [--rounds 40]
                                [--no-aa] [BINARY ...]
(default BINARY: the newest target/release/deps/safe_overhead-<hash>; build it with
`cargo bench -p ofi --bench safe_overhead --no-run`)
"""

import argparse
import glob
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINE = re.compile(r"differences of means\): ([-+0-9.]+) ns")


def one_run(exe, aa, args):
    """One safe_overhead run; its figure in ns, or None if it failed."""
    cmd = [exe, "-n", str(args.iters), "--rounds", str(args.rounds)]
    if aa:
        cmd.append("--aa")
    env = dict(os.environ, FI_PROVIDER=os.environ.get("FI_PROVIDER", "shm"))
    try:
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return None
    m = LINE.search(out.stdout)
    return float(m.group(1)) if m and out.returncode == 0 else None


def default_binary():
    """The newest build of the bench: target/release/deps/safe_overhead-<hash>."""
    found = [p for p in glob.glob(os.path.join(ROOT, "target/release/deps/safe_overhead-*"))
             if "." not in os.path.basename(p) and os.access(p, os.X_OK)]
    if not found:
        sys.exit("safe_overhead.py: no target/release/deps/safe_overhead-<hash> "
                 "(build it: cargo bench -p ofi --bench safe_overhead --no-run)")
    return max(found, key=os.path.getmtime)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--copies", type=int, default=4)
    p.add_argument("--runs", type=int, default=10, help="runs per copy and mode")
    p.add_argument("--iters", type=int, default=20000)
    p.add_argument("--rounds", type=int, default=40)
    p.add_argument("--no-aa", action="store_true", help="skip the --aa calibration")
    p.add_argument("binaries", nargs="*")
    args = p.parse_args()
    builds = args.binaries or [default_binary()]
    for b in builds:
        if not os.access(b, os.X_OK):
            sys.exit(f"safe_overhead.py: {b} is not an executable (build it first)")
    modes = [False] if args.no_aa else [False, True]
    tmp = tempfile.mkdtemp(prefix="safe_overhead.")
    try:
        # (build index, copy index, aa) -> figures; names of equal length, so the
        # copies' argument and environment sizes are the same too.
        jobs = {}
        for bi, b in enumerate(builds):
            for ci in range(args.copies):
                exe = os.path.join(tmp, f"b{bi:02d}c{ci:02d}")
                shutil.copy2(b, exe)
                for aa in modes:
                    jobs[(bi, ci, aa)] = (exe, [])
        start = time.time()
        for _ in range(args.runs):
            for key, (exe, figs) in jobs.items():
                v = one_run(exe, key[2], args)
                if v is not None:
                    figs.append(v)
        print(f"safe_overhead.py: {args.copies} copies x {args.runs} runs per build and "
              f"mode, -n {args.iters} --rounds {args.rounds}, "
              f"{time.time() - start:.0f} s, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
        for bi, b in enumerate(builds):
            over = {}
            for aa in modes:
                meds = []
                for ci in range(args.copies):
                    figs = jobs[(bi, ci, aa)][1]
                    if figs:
                        meds.append(statistics.median(figs))
                name = "raw' - raw (--aa)" if aa else "safe - raw"
                if not meds:
                    print(f"  {b}: {name}: no run succeeded")
                    continue
                per_copy = ", ".join(f"{m:+.1f}" for m in meds)
                over[aa] = statistics.median(meds)
                print(f"  {b}: {name}: copies {per_copy} ns; median {over[aa]:+.1f}, "
                      f"mean {statistics.mean(meds):+.1f} ns")
            if len(over) == 2:
                print(f"  {b}: safe - raw less the A/A (medians over copies): "
                      f"{over[False] - over[True]:+.1f} ns")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
