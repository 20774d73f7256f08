#!/usr/bin/env python3
"""Compare ofi-rs's fi_pingpong with the C tool (/usr/bin/fi_pingpong), cell by cell.

A cell is a provider and endpoint type; for each cell and message size both tools run
as a server and a client process on 127.0.0.1, each side pinned with taskset (server on
one CPU, client on another when there are two), several passes, the tools interleaved
(their order alternates between passes). Each run's client table gives usec/xfer and
MB/sec; the script prints, per cell and size, the median of each tool and the ratio
ours / C (latency: above 1 means ours is slower), and writes a markdown table with the
date, the machine, the load and the command, for docs/PERFORMANCE.md.

A cell a tool cannot run (no such provider, or a size over its limit) shows "n/a".
Every process runs under a time limit and is killed (by its PID) and reaped when over
it; nothing is left running.

Usage: scripts/compare.py [--passes 3] [--iters 1000] [--sizes 1,64,1024,8192,65536,1048576]
                          [--ours PATH] [--c PATH] [--cells tcp:msg,udp:dgram,...]
                          [--out FILE] [--bw PATH]
"""

import argparse
import datetime
import os
import platform
import re
import socket
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (label, provider, endpoint type, ours can run it)
CELLS = [
    ("tcp msg", "tcp", "msg", True),
    ("udp dgram", "udp", "dgram", True),
    ("shm rdm", "shm", "rdm", True),
    ("tcp;ofi_rxm rdm", "tcp;ofi_rxm", "rdm", True),
    ("udp;ofi_rxd rdm", "udp;ofi_rxd", "rdm", True),
]

LIMIT = 120  # seconds per process


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpus():
    try:
        allowed = sorted(os.sched_getaffinity(0))
    except AttributeError:
        allowed = list(range(os.cpu_count() or 1))
    if len(allowed) >= 2:
        return str(allowed[0]), str(allowed[1])
    return str(allowed[0]), str(allowed[0])


def stop(p):
    """Kill (by PID) and reap a process we started, if it still runs."""
    if p.poll() is None:
        p.kill()
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def parse_table(text):
    """{size_label: (usec_per_xfer, mb_per_sec, ack_field)} from a result table."""
    rows = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) == 8 and re.match(r"^[0-9.]+[kmg]?$", f[0]) and f[4].endswith("s"):
            try:
                rows[f[0]] = (float(f[6]), float(f[5]), f[2])
            except ValueError:
                pass
    return rows


def run_one(tool, prov, ep, size, iters, env, pin):
    """One server + client run of `tool`; the client's row for `size`, or an error."""
    port = str(free_port())
    common = ["-p", prov, "-e", ep, "-I", str(iters), "-S", str(size)]
    srv = subprocess.Popen(
        ["taskset", "-c", pin[0], tool] + common + ["-B", port],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    try:
        deadline = time.time() + 15
        while True:
            cli = subprocess.run(
                ["taskset", "-c", pin[1], tool] + common + ["-P", port, "127.0.0.1"],
                capture_output=True, env=env, text=True, timeout=LIMIT)
            refused = "refused" in cli.stderr.lower() and not cli.stdout
            if not refused or time.time() > deadline or srv.poll() is not None:
                break
            time.sleep(0.05)
        try:
            srv.wait(timeout=LIMIT)
        except subprocess.TimeoutExpired:
            pass
    except subprocess.TimeoutExpired:
        stop(srv)
        return None, "client timed out"
    finally:
        stop(srv)
    srv_err = srv.stderr.read() if srv.stderr else ""
    if cli.returncode != 0:
        msg = (cli.stderr.strip() or srv_err.strip()).splitlines()
        return None, msg[-1] if msg else f"exit {cli.returncode}"
    rows = parse_table(cli.stdout)
    if len(rows) != 1:
        return None, "no result row"
    return next(iter(rows.values())), None


def bw_one(tool, prov, ep, size, iters, env):
    """Our fi_bw --self for one size: (MB/s, Mmsgs/s) or None."""
    try:
        r = subprocess.run([tool, "--self", "-p", prov, "-e", ep, "-I", str(iters),
                            "-S", str(size)], capture_output=True, env=env, text=True,
                           timeout=LIMIT)
    except subprocess.TimeoutExpired:
        return None
    rows = parse_table(r.stdout)
    if r.returncode != 0 or len(rows) != 1:
        return None
    usec, mbs, _ = next(iter(rows.values()))
    return mbs, (1.0 / usec if usec > 0 else 0.0)


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def cpu_times():
    """(total, steal) jiffies of all CPUs, from /proc/stat."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v), (v[7] if len(v) > 7 else 0)
    except (OSError, ValueError):
        return 0, 0


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def fmt(x):
    return "n/a" if x is None else f"{x:.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--iters", type=int, default=1000)
    ap.add_argument("--sizes", default="1,64,1024,8192,65536,1048576")
    ap.add_argument("--ours", default=os.path.join(ROOT, "target/release/fi_pingpong"))
    ap.add_argument("--c", dest="ctool", default="/usr/bin/fi_pingpong")
    ap.add_argument("--bw", default=os.path.join(ROOT, "target/release/fi_bw"),
                    help="our fi_bw, for a throughput table of our providers ('' to skip)")
    ap.add_argument("--cells", default="",
                    help="comma list of provider:ep (default: all cells)")
    ap.add_argument("--out", default="", help="write the markdown here as well")
    a = ap.parse_args()

    sizes = [int(s) for s in a.sizes.split(",")]
    cells = CELLS
    if a.cells:
        want = {tuple(c.split(":")) for c in a.cells.split(",")}
        cells = [c for c in CELLS if (c[1], c[2]) in want]
    have_c = os.access(a.ctool, os.X_OK)
    have_ours = os.access(a.ours, os.X_OK)
    if not have_c:
        print(f"note: {a.ctool} not found; C column is n/a", file=sys.stderr)
    if not have_ours:
        print(f"error: {a.ours} not found (cargo build --release -p ofi-tools)",
              file=sys.stderr)
        return 2
    env = dict(os.environ)
    for v in ("FI_PROVIDER", "FI_HOOK", "FI_LOG_LEVEL"):
        env.pop(v, None)
    # The C providers pick an interface; keep them (and ours) on loopback.
    env.setdefault("FI_TCP_IFACE", "lo")
    env.setdefault("FI_UDP_IFACE", "lo")
    pin = cpus()
    load_before = loadavg()
    t0, s0 = cpu_times()
    started = datetime.datetime.now(datetime.timezone.utc)

    # results[(cell, size, tool)] = [usec...], mbs[...] = [MB/s...]
    usec = {}
    mbs = {}
    errors = {}
    for p in range(a.passes):
        for label, prov, ep, ours_ok in cells:
            for size in sizes:
                tools = []
                if have_c:
                    tools.append(("C", a.ctool))
                if ours_ok:
                    tools.append(("ours", a.ours))
                if p % 2 == 1:
                    tools.reverse()
                for name, path in tools:
                    key = (label, size, name)
                    if key in errors:
                        continue  # failed once: the tool cannot run this cell
                    row, err = run_one(path, prov, ep, size, a.iters, env, pin)
                    if row is None:
                        errors[key] = err
                        print(f"pass {p + 1}: {label} {size} {name}: {err}",
                              file=sys.stderr)
                        continue
                    usec.setdefault(key, []).append(row[0])
                    mbs.setdefault(key, []).append(row[1])
        print(f"pass {p + 1}/{a.passes} done", file=sys.stderr)
    load_after = loadavg()
    t1, s1 = cpu_times()
    steal = 100.0 * (s1 - s0) / (t1 - t0) if t1 > t0 else 0.0

    def med(d, key):
        v = d.get(key)
        return statistics.median(v) if v else None

    cmd = "scripts/compare.py " + " ".join(sys.argv[1:])
    lines = [
        f"Measured {started:%Y-%m-%d %H:%M} UTC on `{socket.gethostname()}`: {cpu_model()}, "
        f"{os.cpu_count()} CPUs; load average before {load_before}, after {load_after}; "
        f"steal {steal:.1f}% during the passes.",
        "",
        f"Method: `{cmd}` — per cell and size, a server and a client process on 127.0.0.1 "
        f"(taskset: server CPU {pin[0]}, client CPU {pin[1]}), `-I {a.iters}`, "
        f"{a.passes} passes with the two tools interleaved (order alternating); the figure is "
        "the median of the client's usec/xfer (half a round trip) and MB/sec; 'best' is the "
        "ratio of the two tools' fastest passes. "
        "ours/C > 1 means ours is slower. Debug logging off; release build.",
        "",
        "| cell | bytes | C usec/xfer | ours usec/xfer | ours/C | ours/C best | C MB/s | ours MB/s |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for label, prov, ep, ours_ok in cells:
        for size in sizes:
            c_u = med(usec, (label, size, "C"))
            o_u = med(usec, (label, size, "ours")) if ours_ok else None
            ratio = f"{o_u / c_u:.2f}" if (c_u and o_u) else "n/a"
            c_b = min(usec.get((label, size, "C"), []), default=None)
            o_b = min(usec.get((label, size, "ours"), []), default=None) if ours_ok else None
            best = f"{o_b / c_b:.2f}" if (c_b and o_b) else "n/a"
            lines.append(
                f"| {label} | {size} | {fmt(c_u)} | {fmt(o_u)} | {ratio} | {best} | "
                f"{fmt(med(mbs, (label, size, 'C')))} | "
                f"{fmt(med(mbs, (label, size, 'ours')) if ours_ok else None)} |")
    if errors:
        # One line per cell, tool and message, with the sizes it hit.
        grouped = {}
        for (label, size, tool), msg in sorted(errors.items(), key=lambda kv: kv[0][1]):
            msg = re.sub(r"^\S*fi_pingpong: ", "", msg)
            grouped.setdefault((label, tool, msg), []).append(str(size))
        lines += ["", "Why a cell is n/a:", ""]
        for (label, tool, msg), sz in grouped.items():
            lines.append(f"- {label}, {tool}, {','.join(sz)} B: `{msg}`")

    if a.bw and os.access(a.bw, os.X_OK):
        lines += ["", f"Throughput of ours (`fi_bw --self`, window 64, `-I {a.iters * 5}`, "
                  "median of the passes):", "",
                  "| cell | bytes | MB/s | Mmsgs/s |", "| --- | ---: | ---: | ---: |"]
        for label, prov, ep, ours_ok in cells:
            if not ours_ok:
                continue
            for size in sizes:
                got = [bw_one(a.bw, prov, ep, size, a.iters * 5, env)
                       for _ in range(a.passes)]
                got = [g for g in got if g]
                if got:
                    m = statistics.median([g[0] for g in got])
                    r = statistics.median([g[1] for g in got])
                    lines.append(f"| {label} | {size} | {m:.2f} | {r:.3f} |")
                else:
                    lines.append(f"| {label} | {size} | n/a | n/a |")

    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
