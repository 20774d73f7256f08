#!/usr/bin/env python3
"""Compare ofi-rs's fi_pingpong with the C tool (/usr/bin/fi_pingpong), cell by cell, at steady state.

A cell is a provider and endpoint type. For each cell and message size, every tool (the
C library's and one or more builds of ours) runs as a server and a client process, the
server pinned to one CPU and the client to the other (taskset, both tools alike), with
the same iteration count: chosen per cell and size by a calibration run so that each run
lasts at least --seconds (1 s) and, up to 8 KiB, at least 20 000 round trips (short runs
catch tools before they settle: C's rxm at 2 000 iterations is three times slower than
at 50 000). Then --passes passes, the tools interleaved (their order rotates between
passes); the figure is the median of the client's usec/xfer (half a round trip) and
MB/sec over the passes.

Placements: loopback (127.0.0.1), and with --netns also two network namespaces joined by
a veth pair (10.x addresses, MTU 1500), the server in one and the client in the other.
Each placement also gets the link's own limit, measured with plain sockets by
scripts/linkprobe.c (compiled here with cc): a TCP and a UDP ping-pong of each size and a
TCP stream.

Output: a markdown table (stdout, and --out FILE) with the date, machine, load and
command; --plot FILE writes an SVG of latency and bandwidth against size, ours vs C
(plain SVG written by this script, no extra package); --json FILE the raw samples.
A cell a tool cannot run is "n/a" with its reason listed under the table. Every process
runs under a time limit and is killed (by its PID) and reaped; the namespaces are
deleted at the end, also on error or Ctrl-C.

Usage: scripts/compare.py [--passes 3] [--sizes 1,64,1024,8192,65536,1048576]
          [--cells shm:rdm,tcp:msg,...] [--ours [NAME=]PATH ...] [--c PATH] [--netns]
          [--seconds 1.0] [--min-iters 20000] [--iters N] [--bw PATH|''] [--no-link]
          [--out FILE] [--plot FILE.svg] [--json FILE]
       scripts/compare.py --from-json FILE [--from-json MORE] [--show NAME[=SHOWN],...]
          [--out FILE] [--plot FILE.svg]          (tables and plot of saved runs)
Needs release binaries: cargo build --release -p ofi-tools. --netns needs root (ip netns).
Ctrl-C or SIGTERM stops every process, removes the namespaces and still writes the
table of the passes done so far.
"""

import argparse
import datetime
import json
import math
import os
import platform
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (label, provider, endpoint type)
CELLS = [
    ("shm rdm", "shm", "rdm"),
    ("tcp msg", "tcp", "msg"),
    ("tcp;ofi_rxm rdm", "tcp;ofi_rxm", "rdm"),
    ("udp dgram", "udp", "dgram"),
    ("udp;ofi_rxd rdm", "udp;ofi_rxd", "rdm"),
]

SMALL = 8192  # sizes up to this one get at least --min-iters round trips
MAX_ITERS = 5_000_000
CALIBRATION_LIMIT = 30  # seconds for a calibration run (its length is unknown)

LIVE = set()  # processes started and not yet reaped


class Failed(Exception):
    """A run that gave no figure; the message says why."""


class Hung(Failed):
    """The first, short calibration run of a cell gave nothing in CALIBRATION_LIMIT."""


def terminate(signum, _frame):
    raise KeyboardInterrupt(f"signal {signum}")


def stop(proc):
    """Kill (by PID) and reap a process we started, if it still runs."""
    if proc.poll() is None:
        proc.kill()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
    LIVE.discard(proc)


def spawn(argv, env):
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, text=True)
    LIVE.add(proc)
    return proc


def finish(proc, limit):
    """(returncode, stdout, stderr) of proc, killed when over `limit` seconds."""
    try:
        out, err = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        stop(proc)
        raise Failed(f"no result in {limit:.0f} s (killed)")
    LIVE.discard(proc)
    return proc.returncode, out, err


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def cpus():
    try:
        allowed = sorted(os.sched_getaffinity(0))
    except AttributeError:
        allowed = list(range(os.cpu_count() or 1))
    if len(allowed) >= 2:
        return str(allowed[0]), str(allowed[1])
    return str(allowed[0]), str(allowed[0])


# ---------------------------------------------------------------------------------------
# Placements: where the server and the client run.


class Loopback:
    name = "loopback"
    short = "lo"

    def __init__(self, base_env):
        self.base_env = base_env
        self.server_addr = "127.0.0.1"

    def wrap(self, _side, argv):
        return argv

    def env(self, _side):
        env = dict(self.base_env)
        # The C providers pick an interface; keep them (and ours) on loopback.
        env.setdefault("FI_TCP_IFACE", "lo")
        env.setdefault("FI_UDP_IFACE", "lo")
        return env

    def close(self):
        pass


class Netns:
    """Two namespaces joined by a veth pair; removed by close()."""

    name = "two namespaces"
    short = "ns"

    def __init__(self, base_env):
        self.base_env = base_env
        tag = f"{os.getpid() % 100000}{os.urandom(2).hex()}"
        self.ns = {"server": f"ofcmp{tag}s", "client": f"ofcmp{tag}c"}
        self.dev = {"server": f"vc{tag}s", "client": f"vc{tag}c"}  # <= 15 chars
        octet = 16 + os.getpid() % 200
        self.addr = {"server": f"10.{octet}.0.1", "client": f"10.{octet}.0.2"}
        self.server_addr = self.addr["server"]
        self.created = []
        try:
            for side in ("server", "client"):
                self._ip("netns", "add", self.ns[side])
                self.created.append(self.ns[side])
            self._ip("link", "add", self.dev["server"], "netns", self.ns["server"], "type",
                     "veth", "peer", "name", self.dev["client"], "netns", self.ns["client"])
            for side in ("server", "client"):
                inside = ["ip", "netns", "exec", self.ns[side], "ip"]
                self._run(inside + ["link", "set", "lo", "up"])
                self._run(inside + ["link", "set", self.dev[side], "mtu", "1500", "up"])
                self._run(inside + ["addr", "add", self.addr[side] + "/24", "dev",
                                    self.dev[side]])
            # Wait (bounded) until both ends report the link up.
            deadline = time.time() + 10
            for side in ("server", "client"):
                while True:
                    shown = subprocess.run(
                        ["ip", "netns", "exec", self.ns[side], "ip", "-o", "link", "show",
                         "dev", self.dev[side]], capture_output=True, text=True, timeout=30)
                    if "state UP" in shown.stdout:
                        break
                    if time.time() > deadline:
                        raise Failed(f"{self.dev[side]} not up: {shown.stdout.strip()}")
                    time.sleep(0.05)
        except BaseException:
            self.close()
            raise

    def _ip(self, *args):
        self._run(["ip"] + list(args))

    @staticmethod
    def _run(argv):
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            raise Failed(f"{' '.join(argv)}: {done.stderr.strip()}")

    def wrap(self, side, argv):
        return ["ip", "netns", "exec", self.ns[side]] + argv

    def env(self, side):
        env = dict(self.base_env)
        env["FI_TCP_IFACE"] = self.dev[side]
        env["FI_UDP_IFACE"] = self.dev[side]
        return env

    def close(self):
        for name in reversed(self.created):
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)
        self.created = []


# ---------------------------------------------------------------------------------------
# Runs.


def parse_table(text):
    """[(usec_per_xfer, mb_per_sec, seconds)] from a fi_pingpong / fi_bw result table."""
    rows = []
    for line in text.splitlines():
        fields = line.split()
        if (len(fields) == 8 and re.match(r"^[0-9.]+[kmg]?$", fields[0])
                and fields[4].endswith("s")):
            try:
                rows.append((float(fields[6]), float(fields[5]), float(fields[4][:-1])))
            except ValueError:
                pass
    return rows


def last_line(*texts):
    for text in texts:
        lines = [l for l in (text or "").strip().splitlines() if l.strip()]
        if lines:
            return re.sub(r"^\S*fi_pingpong: ", "", lines[-1].strip())[:160]
    return ""


def client_server(place, pin, server_argv, client_argv, limit, retry_on):
    """Run a server and a client (client retried while the server is not yet up)."""
    server = spawn(place.wrap("server", ["taskset", "-c", pin[0]] + server_argv),
                   place.env("server"))
    try:
        deadline = time.time() + 15
        while True:
            client = spawn(place.wrap("client", ["taskset", "-c", pin[1]] + client_argv),
                           place.env("client"))
            code, out, err = finish(client, limit)
            not_up = code != 0 and any(word in err.lower() for word in retry_on)
            if not not_up or time.time() > deadline or server.poll() is not None:
                break
            time.sleep(0.05)
        try:
            server.wait(timeout=10 if code == 0 else 1)
        except subprocess.TimeoutExpired:
            pass
    finally:
        stop(server)
    server_err = server.stderr.read() if server.stderr else ""
    return code, out, err, server_err


RETRIED = []  # runs that timed out once and were run again


def run_pingpong(tool, cell, size, iters, place, pin, limit):
    """One fi_pingpong server + client run: (usec/xfer, MB/s, seconds); a run that times
    out is run once more (C's shm pingpong now and then waits forever at start-up)."""
    try:
        return pingpong_once(tool, cell, size, iters, place, pin, limit)
    except Failed as err:
        if not str(err).startswith("no result in"):
            raise
        RETRIED.append(f"{tool} {cell[0]} {size} B {place.short}")
        print(f"  retrying {RETRIED[-1]}: {err}", file=sys.stderr)
        return pingpong_once(tool, cell, size, iters, place, pin, limit)


def pingpong_once(tool, cell, size, iters, place, pin, limit):
    _, prov, ep = cell
    port = str(free_port())
    common = [tool, "-p", prov, "-e", ep, "-I", str(iters), "-S", str(size)]
    code, out, err, server_err = client_server(
        place, pin, common + ["-B", port], common + ["-P", port, place.server_addr],
        limit, ("refused",))
    if code != 0:
        raise Failed(last_line(err, server_err) or f"exit {code}")
    rows = parse_table(out)
    if len(rows) != 1:
        raise Failed("no result row")
    return rows[0]


def run_link(probe, proto, size, iters, place, pin, limit):
    """A plain-socket ping-pong (tcp or udp) of `size` bytes: (usec/xfer, MB/s, seconds)."""
    if proto == "udp" and size > 65507:
        raise Failed("above a datagram's size")
    port = str(free_port())
    code, out, err, server_err = client_server(
        place, pin, [probe, "server", proto, port],
        [probe, "client", proto, place.server_addr, port, str(size), str(iters)],
        limit, ("connect", "no answer"))
    match = re.search(r"usec_per_xfer ([0-9.]+)", out)
    if code != 0 or not match:
        raise Failed(last_line(err, server_err) or f"exit {code}")
    usec = float(match.group(1))
    return usec, size / usec, 2 * iters * usec * 1e-6


def run_stream(probe, seconds, place, pin):
    port = str(free_port())
    code, out, err, server_err = client_server(
        place, pin, [probe, "server", "stream", port],
        [probe, "client", "stream", place.server_addr, port, str(seconds)],
        seconds + 30, ("connect",))
    match = re.search(r"mb_per_sec ([0-9.]+)", out)
    if code != 0 or not match:
        raise Failed(last_line(err, server_err) or f"exit {code}")
    return float(match.group(1))


def run_bw(tool, cell, size, iters, env, limit):
    """Our fi_bw --self (a window of 64 in flight): (usec/msg, MB/s, seconds)."""
    _, prov, ep = cell
    proc = spawn([tool, "--self", "-p", prov, "-e", ep, "-I", str(iters), "-S", str(size)],
                 env)
    code, out, err = finish(proc, limit)
    rows = parse_table(out)
    if code != 0 or len(rows) != 1:
        raise Failed(last_line(err) or f"exit {code}")
    return rows[0]


def round_up(count):
    """count rounded up to two significant digits."""
    if count < 100:
        return int(count)
    scale = 10 ** (len(str(int(count))) - 2)
    return int(math.ceil(count / scale) * scale)


def calibrate(run, size, args, per_iter_xfers=2):
    """(iterations, usec per transfer): run(iters) lasts >= args.seconds with that count
    (and it is at least --min-iters at small sizes).

    `run(iters)` returns (usec per transfer, MB/s, seconds). The calibration runs grow
    until one of them lasts long enough itself, so a tool that speeds up once it has
    settled is measured settled."""
    floor = args.min_iters if size <= SMALL else 1
    if args.iters:
        usec, _, _ = run(min(args.iters, 2000), CALIBRATION_LIMIT)
        return args.iters, usec
    iters = 2000 if size <= SMALL else (200 if size <= 65536 else 20)
    try:
        usec, _, _ = run(iters, CALIBRATION_LIMIT)
    except Failed as err:
        if str(err).startswith("no result in"):
            raise Hung(str(err)) from None
        raise
    for _ in range(5):
        lasted = per_iter_xfers * iters * usec * 1e-6
        if (lasted >= args.seconds and iters >= floor) or iters >= MAX_ITERS:
            return iters, usec
        needed = args.seconds * 1.2 / max(per_iter_xfers * usec * 1e-6, 1e-9)
        iters = min(MAX_ITERS, round_up(max(floor, needed, iters * 2)))
        expected = per_iter_xfers * iters * usec * 1e-6
        usec, _, _ = run(iters, max(CALIBRATION_LIMIT, 10 * expected))
    return iters, usec


# ---------------------------------------------------------------------------------------
# Environment facts.


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
            values = [int(x) for x in f.readline().split()[1:]]
        return sum(values), (values[7] if len(values) > 7 else 0)
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


def build_probe(tmp):
    source = os.path.join(ROOT, "scripts", "linkprobe.c")
    binary = os.path.join(tmp, "linkprobe")
    compiler = shutil.which("cc") or shutil.which("gcc")
    if not compiler or not os.path.exists(source):
        return None, "no C compiler (cc) for scripts/linkprobe.c"
    done = subprocess.run([compiler, "-O2", "-o", binary, source], capture_output=True,
                          text=True, timeout=120)
    if done.returncode != 0:
        return None, "linkprobe.c did not build: " + last_line(done.stderr)
    return binary, None


# ---------------------------------------------------------------------------------------
# Output.


def fmt(value, digits=2):
    """value with `digits` decimals; digits=None: fewer as the value grows (MB/s)."""
    if value is None:
        return "n/a"
    if digits is None:
        digits = 0 if value >= 100 else (1 if value >= 10 else 2)
    return f"{value:.{digits}f}"


def median(samples):
    return statistics.median(samples) if samples else None


class Notes:
    """Numbered reasons for n/a cells."""

    def __init__(self):
        self.items = []

    def ref(self, text):
        if text not in self.items:
            self.items.append(text)
        return f"n/a [{self.items.index(text) + 1}]"


def markdown(res, settings, cells, sizes, tools, places, meta):
    notes = Notes()
    ours = [name for name, _ in tools if name != "C"]
    lines = [
        f"Measured {meta['started']} UTC on `{meta['host']}`: {meta['cpu']}, "
        f"{meta['ncpu']} CPUs; load average before {meta['load_before']}, after "
        f"{meta['load_after']}; steal {meta['steal']:.1f}% during the passes; "
        f"{meta['minutes']:.0f} min.",
        "",
        f"Command: `{meta['command']}`. Tools: "
        + ", ".join(f"{name} = `{path}`" for name, path in tools) + ".",
        "",
        f"Method: per cell and size, server and client pinned (taskset: server CPU "
        f"{meta['pin'][0]}, client CPU {meta['pin'][1]}), every tool with the same `-I`, "
        + (f"fixed at {settings['iters']} (no calibration); " if settings.get("iters") else
           f"chosen by calibration so that a run lasts ≥ {settings['seconds']:g} s "
           f"(≥ {settings['min_iters']} round trips up to {SMALL} B); ")
        + (f"{settings['passes']} passes" if not settings.get("interrupted") else
           f"interrupted after {settings.get('passes_done', 0)} of {settings['passes']} "
           "passes (the samples of the unfinished one included)")
        + ", tools "
        "interleaved (order rotating); medians of the passes. usec/xfer is half a round "
        "trip; MB/s is 10^6 B/s with one message in flight. `x/C` > 1 means x is slower "
        "(latency) or faster (MB/s). `link`: plain sockets between the same two places "
        "(scripts/linkprobe.c; TCP ping-pong of that size for shm/tcp/rxm rows, UDP for "
        "udp/rxd rows up to 65507 B).",
    ]
    if meta.get("calibrated"):
        lines += ["", "Iterations (`-I`) per cell, size and place: " + "; ".join(
            f"{label} {size} B {place} {count}"
            for label, size, place, count in meta["calibrated"]) + "."]
    for filled in meta.get("filled", []):
        lines += ["", f"Cells taken {filled}."]
    if meta.get("retried"):
        lines += ["", f"{len(meta['retried'])} run(s) gave no result in their time "
                  "limit and were run again: " + "; ".join(meta["retried"]) + "."]
    for place in places:
        stream = res.get(("stream", place.short))
        lines.append("")
        if stream:
            figure = f"{median(stream):.0f} MB/s"
        elif ("error", "stream", place.short) not in res:
            continue  # not measured (--no-link)
        else:
            figure = notes.ref(f"stream, {place.name}: "
                               + res.get(("error", "stream", place.short), "not measured"))
        lines.append(f"Link limit, {place.name}: plain TCP stream {figure}.")

    place_names = {p.short: p.name for p in places}

    def value(key, index):
        samples = res.get(key)
        return median([s[index] for s in samples]) if samples else None

    def cell_text(key, index, digits=2):
        got = value(key, index)
        if got is not None:
            return fmt(got, digits)
        err = res.get(("error",) + key)
        return notes.ref(f"{key[2]}, {key[0]} {key[1]} B, {place_names[key[3]]}: {err}") \
            if err else "n/a"

    def table(title, first_head, rows):
        """rows: (cell label, size, first column text, 0 = usec/xfer or 1 = MB/s)."""
        head = ["cell", first_head]
        for place in places:
            suffix = f" {place.short}" if len(places) > 1 else ""
            head += [f"C{suffix}"] + [f"{name}{suffix}" for name in ours]
            head += [f"{name}/C{suffix}" for name in ours] + [f"link{suffix}"]
        out = ["", f"{title}:", "", "| " + " | ".join(head) + " |",
               "| --- | " + " | ".join("---:" for _ in head[1:]) + " |"]
        for label, size, first, index in rows:
            digits = 2 if index == 0 else None
            row = [label, first]
            for place in places:
                row.append(cell_text((label, size, "C", place.short), index, digits))
                for name in ours:
                    row.append(cell_text((label, size, name, place.short), index, digits))
                c_value = value((label, size, "C", place.short), index)
                for name in ours:
                    mine = value((label, size, name, place.short), index)
                    row.append(f"{mine / c_value:.2f}" if mine and c_value else "n/a")
                if label.startswith("shm"):
                    row.append("—")
                else:
                    proto = "udp" if label.startswith("udp") and size <= 65507 else "tcp"
                    link_key = (f"link {proto}", size, "link", place.short)
                    link = value(link_key, index)
                    err = res.get(("error",) + link_key)
                    if link is None and err:
                        row.append(notes.ref(f"link {proto} {size} B, {place.name}: {err}"))
                    else:
                        row.append(fmt(link, digits) + (f" ({proto})" if link else ""))
            out.append("| " + " | ".join(row) + " |")
        return out

    small = 64 if 64 in sizes else min(sizes)
    large = 1048576 if 1048576 in sizes else max(sizes)
    summary = []
    for label, _, _ in cells:
        summary.append((label, small, f"{small} B, usec/xfer", 0))
        summary.append((label, large, f"{large} B, MB/s", 1))
    lines += table("Summary: latency at the small size, bandwidth at the large one",
                   "figure", summary)
    lines += table("Latency, usec/xfer (lower is better)", "bytes",
                   [(label, size, str(size), 0) for label, _, _ in cells for size in sizes])
    lines += table("Bandwidth, MB/s, one message in flight (higher is better)", "bytes",
                   [(label, size, str(size), 1) for label, _, _ in cells for size in sizes])

    bw_rows = [k for k in res if k[0] == "bw"]
    if bw_rows:
        lines += ["", "Message rate of ours (`fi_bw --self`, a window of 64 in flight, "
                  f"≥ {settings['seconds']:g} s per run, median of the passes):", "",
                  "| cell | bytes | " + " | ".join(f"{n} MB/s | {n} Mmsg/s" for n in ours)
                  + " |", "| --- | ---: | " + " | ".join("---: | ---:" for _ in ours) + " |"]
        for label, _, _ in cells:
            for size in sizes:
                row = [label, str(size)]
                for name in ours:
                    key = ("bw", label, size, name)
                    samples = res.get(key)
                    if samples:
                        row.append(fmt(median([s[1] for s in samples]), 1))
                        row.append(fmt(median([1.0 / s[0] for s in samples if s[0] > 0]), 3))
                    else:
                        err = res.get(("error",) + key, "no figure")
                        row += [notes.ref(f"fi_bw {name}, {label} {size} B: {err}"), ""]
                lines.append("| " + " | ".join(row) + " |")

    if notes.items:
        lines += ["", "Why a cell is n/a:", ""]
        lines += [f"{i + 1}. `{text}`" for i, text in enumerate(notes.items)]
    return "\n".join(lines) + "\n"


# SVG plot ------------------------------------------------------------------------------

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"]
C_DASH = "7,4"
OURS_DASHES = ["", "2,3", "9,3,2,3", "4,2"]  # the last build solid, earlier ones dotted


def dash_of(tools, index):
    """Stroke pattern of tools[index]: C dashed, our builds solid (last) or dotted."""
    if tools[index][0] == "C":
        return C_DASH
    ours = [i for i, (name, _) in enumerate(tools) if name != "C"]
    return OURS_DASHES[(len(ours) - 1 - ours.index(index)) % len(OURS_DASHES)]


def svg_plot(res, cells, sizes, tools, places, path):
    """Latency and bandwidth against size, one panel each per placement (log-log)."""
    width, height, pad_left, pad_top, gap = 420, 300, 70, 60, 40
    legend_h = 22 * (len(cells) + len(tools)) // 2 + 40
    total_w = pad_left + 2 * (width + gap) + 20
    total_h = pad_top + len(places) * (height + gap + 30) + legend_h
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{total_w}" height="{total_h}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{total_w}" height="{total_h}" fill="white"/>',
           f'<text x="{total_w / 2}" y="20" text-anchor="middle" font-size="15">'
           'fi_pingpong: ofi-rs vs the C library (median of the passes)</text>']
    xs = [math.log10(s) for s in sizes]
    x_lo, x_hi = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
    for row, place in enumerate(places):
        for col, (title, index, unit) in enumerate((("latency", 0, "usec/xfer"),
                                                    ("bandwidth", 1, "MB/s"))):
            left = pad_left + col * (width + gap)
            top = pad_top + row * (height + gap + 30)
            series = []
            for ci, (label, _, _) in enumerate(cells):
                for ti, (name, _) in enumerate(tools):
                    points = []
                    for size in sizes:
                        samples = res.get((label, size, name, place.short))
                        if samples:
                            v = median([s[index] for s in samples])
                            if v and v > 0:
                                points.append((math.log10(size), math.log10(v)))
                    if points:
                        series.append((COLORS[ci % len(COLORS)], dash_of(tools, ti),
                                       points))
            ys = [p[1] for _, _, pts in series for p in pts] or [0, 1]
            y_lo, y_hi = math.floor(min(ys)), math.ceil(max(ys))
            if y_hi == y_lo:
                y_hi += 1

            def sx(x):
                return left + (x - x_lo) / (x_hi - x_lo) * width

            def sy(y):
                return top + height - (y - y_lo) / (y_hi - y_lo) * height

            out.append(f'<rect x="{left}" y="{top}" width="{width}" height="{height}" '
                       'fill="none" stroke="#888"/>')
            out.append(f'<text x="{left + width / 2}" y="{top - 8}" text-anchor="middle">'
                       f'{title}, {place.name} ({unit}, log)</text>')
            for decade in range(y_lo, y_hi + 1):
                y = sy(decade)
                out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + width}" '
                           f'y2="{y:.1f}" stroke="#eee"/>')
                out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">'
                           f'{10.0 ** decade:g}</text>')
            for size in sizes:
                x = sx(math.log10(size))
                label = (f"{size // 1048576}M" if size >= 1048576 and size % 1048576 == 0
                         else f"{size // 1024}k" if size >= 1024 and size % 1024 == 0
                         else str(size))
                out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" '
                           f'y2="{top + height}" stroke="#eee"/>')
                out.append(f'<text x="{x:.1f}" y="{top + height + 16}" '
                           f'text-anchor="middle">{label}</text>')
            out.append(f'<text x="{left + width / 2}" y="{top + height + 30}" '
                       'text-anchor="middle">message size (bytes)</text>')
            for color, dash, points in series:
                coords = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in points)
                dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
                out.append(f'<polyline points="{coords}" fill="none" stroke="{color}" '
                           f'stroke-width="2"{dash_attr}/>')
                for x, y in points:
                    out.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="2.5" '
                               f'fill="{color}"/>')
    legend_top = pad_top + len(places) * (height + gap + 30) + 5
    for ci, (label, _, _) in enumerate(cells):
        y = legend_top + 20 * ci
        out.append(f'<line x1="{pad_left}" y1="{y}" x2="{pad_left + 30}" y2="{y}" '
                   f'stroke="{COLORS[ci % len(COLORS)]}" stroke-width="3"/>')
        out.append(f'<text x="{pad_left + 38}" y="{y + 4}">{label}</text>')
    for ti, (name, _) in enumerate(tools):
        y = legend_top + 20 * ti
        x = pad_left + width + gap
        dash = dash_of(tools, ti)
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        out.append(f'<line x1="{x}" y1="{y}" x2="{x + 40}" y2="{y}" stroke="black" '
                   f'stroke-width="2"{dash_attr}/>')
        shown = "C libfabric 1.17" if name == "C" else f"ofi-rs ({name})"
        out.append(f'<text x="{x + 48}" y="{y + 4}">{shown}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


# ---------------------------------------------------------------------------------------


def parse_ours(values):
    default = os.path.join(ROOT, "target/release/fi_pingpong")
    if not values:
        return [("ours", default)]
    builds = []
    for value in values:
        name, sep, path = value.partition("=")
        if not sep:
            name, path = ("ours" if len(values) == 1 else f"ours{len(builds) + 1}"), value
        if name == "C" or name in (n for n, _ in builds):
            raise SystemExit(f"error: build name {name!r} is taken")
        builds.append((name, path))
    return builds


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=1.0,
                    help="minimum length of every run (default 1 s)")
    ap.add_argument("--min-iters", type=int, default=20000,
                    help=f"minimum round trips per run up to {SMALL} B (default 20000)")
    ap.add_argument("--iters", type=int, default=0,
                    help="a fixed -I for every run instead of the calibration")
    ap.add_argument("--sizes", default="1,64,1024,8192,65536,1048576")
    ap.add_argument("--ours", action="append", default=[], metavar="[NAME=]PATH",
                    help="a build of our fi_pingpong; repeat for several "
                    "(default: target/release/fi_pingpong)")
    ap.add_argument("--c", dest="ctool", default="/usr/bin/fi_pingpong")
    ap.add_argument("--bw", default=None,
                    help="fi_bw --self table of our builds: the fi_bw next to each "
                    "fi_pingpong (default), or '' to skip")
    ap.add_argument("--cells", default="",
                    help="comma list of provider:ep (default: all cells)")
    ap.add_argument("--netns", action="store_true",
                    help="also run across two network namespaces joined by a veth pair")
    ap.add_argument("--no-link", action="store_true",
                    help="skip the plain-socket link limit")
    ap.add_argument("--out", default="", help="write the markdown here as well")
    ap.add_argument("--plot", default="", help="write an SVG plot here")
    ap.add_argument("--json", default="", help="write the raw samples here")
    ap.add_argument("--from-json", action="append", default=[], metavar="FILE",
                    help="no measuring: the table and plot of an earlier --json file; "
                    "given again, later files fill the cells the first one lacks")
    ap.add_argument("--show", default="", metavar="NAME[=SHOWN],...",
                    help="with --from-json: only these builds of ours, optionally renamed")
    args = ap.parse_args()

    if args.from_json:
        return replay(args)
    sizes = [int(s) for s in args.sizes.split(",")]
    cells = CELLS
    if args.cells:
        want = {tuple(c.split(":")) for c in args.cells.split(",")}
        cells = [c for c in CELLS if (c[1], c[2]) in want]
        if not cells:
            print(f"error: no cell matches {args.cells}", file=sys.stderr)
            return 2
    builds = parse_ours(args.ours)
    for name, path in builds:
        if not os.access(path, os.X_OK):
            print(f"error: {path} ({name}) not found (cargo build --release -p ofi-tools)",
                  file=sys.stderr)
            return 2
    tools = list(builds)
    if os.access(args.ctool, os.X_OK):
        tools.insert(0, ("C", args.ctool))
    else:
        print(f"note: {args.ctool} not found (apt-get install libfabric-bin); C column is "
              "n/a", file=sys.stderr)
    bw_tools = []
    if args.bw != "":
        for name, path in builds:
            bw = args.bw if (args.bw and len(builds) == 1) else \
                os.path.join(os.path.dirname(path), "fi_bw")
            if os.access(bw, os.X_OK):
                bw_tools.append((name, bw))

    base_env = dict(os.environ)
    for var in ("FI_PROVIDER", "FI_HOOK", "FI_LOG_LEVEL"):
        base_env.pop(var, None)
    pin = cpus()
    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGHUP, terminate)
    tmp = tempfile.mkdtemp(prefix="compare-")
    places = []
    res = {}
    try:
        places.append(Loopback(base_env))
        if args.netns:
            places.append(Netns(base_env))
        probe, probe_err = (None, "skipped") if args.no_link else build_probe(tmp)
        if probe_err and not args.no_link:
            print(f"note: link limit n/a: {probe_err}", file=sys.stderr)
        meta = {"load_before": loadavg(), "pin": pin,
                "command": "scripts/compare.py " + shlex.join(sys.argv[1:])}
        jiffies0, steal0 = cpu_times()
        started = datetime.datetime.now(datetime.timezone.utc)
        meta["started"] = f"{started:%Y-%m-%d %H:%M}"
        t_start = time.time()
        meta["passes_done"] = 0
        try:
            measure(res, args, cells, sizes, tools, bw_tools, places, pin, probe, base_env,
                    meta)
        except KeyboardInterrupt:
            # Ctrl-C or SIGTERM: stop everything, but keep what the passes so far gave.
            meta["interrupted"] = True
            print("interrupted; writing the passes done so far", file=sys.stderr)
        meta["minutes"] = (time.time() - t_start) / 60
        meta["retried"] = RETRIED
        meta["load_after"] = loadavg()
        jiffies1, steal1 = cpu_times()
        meta["steal"] = 100.0 * (steal1 - steal0) / (jiffies1 - jiffies0) \
            if jiffies1 > jiffies0 else 0.0
    finally:
        for proc in list(LIVE):
            stop(proc)
        for place in places:
            place.close()
        shutil.rmtree(tmp, ignore_errors=True)

    meta.update(seconds=args.seconds, min_iters=args.min_iters, passes=args.passes,
                iters=args.iters,
                cells=[list(c) for c in cells], sizes=sizes, tools=[list(t) for t in tools],
                places=[[p.short, p.name] for p in places],
                host=socket.gethostname(), cpu=cpu_model(), ncpu=os.cpu_count())
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "results": [
                {"key": list(k), "value": v} for k, v in res.items()]}, f, indent=1)
    write_outputs(res, args, meta)
    return 130 if meta.get("interrupted") else 0


class Place:
    """A placement read back from a --json file (its names only)."""

    def __init__(self, short, name):
        self.short, self.name = short, name


def write_outputs(res, args, meta):
    cells = [tuple(c) for c in meta["cells"]]
    tools = [tuple(t) for t in meta["tools"]]
    places = [Place(*p) for p in meta["places"]]
    text = markdown(res, meta, cells, meta["sizes"], tools, places, meta)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    if args.plot:
        svg_plot(res, cells, meta["sizes"], tools, places, args.plot)
        print(f"plot written to {args.plot}", file=sys.stderr)


def name_index(key):
    """Where a result key names a tool: (cell, size, NAME, place), ("bw", cell, size,
    NAME), and the same behind "error"; None for the link's keys."""
    base = 1 if key[0] == "error" else 0
    if len(key) <= base or key[base] == "stream" or str(key[base]).startswith("link"):
        return None
    return base + 3 if key[base] == "bw" else base + 2


def replay(args):
    meta, res = None, {}
    for path in args.from_json:
        data = json.load(open(path))
        got = read_results(data, args)
        if meta is None:
            meta, res = data["meta"], got
            meta["filled"] = []
            continue
        filled = []
        for key, value in got.items():
            if key[0] == "error" or res.get(key):
                continue
            res[key] = value
            res.pop(("error",) + key, None)
            filled.append(" ".join(str(k) for k in key))
        if filled:
            meta["filled"].append(f"from the run of {data['meta']['started']} UTC "
                                  f"(`{data['meta']['command']}`): " + "; ".join(filled))
    write_outputs(res, args, meta)
    return 0


def read_results(data, args):
    """The results of a --json file, with the builds --show keeps (renamed)."""
    meta = data["meta"]
    rename = {}
    if args.show:
        for item in args.show.split(","):
            name, _, shown = item.partition("=")
            rename[name] = shown or name
        meta["tools"] = [[rename.get(name, name), path] for name, path in meta["tools"]
                         if name == "C" or name in rename]
    res = {}
    for item in data["results"]:
        key = item["key"]
        at = name_index(key)
        if rename and at is not None and key[at] != "C":
            if key[at] not in rename:
                continue
            key = key[:at] + [rename[key[at]]] + key[at + 1:]
        value = item["value"]
        if isinstance(value, list):
            value = [tuple(v) if isinstance(v, list) else v for v in value]
        res[tuple(key)] = value
    return res


def measure(res, args, cells, sizes, tools, bw_tools, places, pin, probe, base_env, meta):
    """Calibrate every cell, then run the passes; samples and errors go into `res`."""
    def record(key, fn):
        if ("error",) + key in res:
            return
        try:
            res.setdefault(key, []).append(fn())
        except Failed as err:
            res.pop(key, None) if not res.get(key) else None
            res[("error",) + key] = str(err)
            print(f"  {' '.join(map(str, key))}: n/a ({err})", file=sys.stderr)

    def limit_for(count, usec):
        """Time limit of a run expected to last 2 * count * usec: ten times that, >= 60 s."""
        return max(60.0, 10 * 2 * count * usec * 1e-6)

    # Calibration: one iteration count per (cell, size, place), the largest any tool needs.
    iters = {}
    limits = {}
    hung = {}
    hangs = {}
    for place in places:
        for cell in cells:
            for size in sizes:
                counts = []
                for name, path in tools:
                    key = (cell[0], size, name, place.short)
                    if (cell[0], name, place.short) in hung:
                        res[("error",) + key] = hung[(cell[0], name, place.short)]
                        continue
                    try:
                        counts.append(calibrate(
                            lambda n, limit, path=path, cell=cell, size=size, place=place:
                            run_pingpong(path, cell, size, n, place, pin, limit),
                            size, args))
                    except Failed as err:
                        res[("error",) + key] = str(err)
                        print(f"  {cell[0]} {size} {name} {place.short}: n/a ({err})",
                              file=sys.stderr)
                        if isinstance(err, Hung):
                            # A tool that hangs at two sizes in a row would hang at every
                            # size: skip the others (one hang may be bad luck).
                            streak = hangs.get((cell[0], name, place.short), 0) + 1
                            hangs[(cell[0], name, place.short)] = streak
                            if streak >= 2:
                                hung[(cell[0], name, place.short)] = (
                                    f"not tried: no result at two sizes up to {size} B in "
                                    f"{CALIBRATION_LIMIT} s")
                    else:
                        hangs.pop((cell[0], name, place.short), None)
                if counts:
                    count = max(n for n, _ in counts)
                    slowest = max(usec for _, usec in counts)
                    iters[(cell[0], size, place.short)] = count
                    limits[(cell[0], size, place.short)] = limit_for(count, slowest)
                    meta.setdefault("calibrated", []).append([cell[0], size, place.short, count])
                print(f"calibrated {place.short} {cell[0]} {size} B: -I "
                      f"{iters.get((cell[0], size, place.short), 'n/a')}", file=sys.stderr)
        if probe:
            for proto in ("tcp", "udp"):
                for size in sizes:
                    key = (f"link {proto}", size, "link", place.short)
                    try:
                        count, usec = calibrate(
                            lambda n, limit, proto=proto, size=size, place=place:
                            run_link(probe, proto, size, n, place, pin, limit), size, args)
                        iters[key] = count
                        limits[key] = limit_for(count, usec)
                    except Failed as err:
                        res[("error",) + key] = str(err)
    bw_iters = {}
    for name, path in bw_tools:
        for cell in cells:
            for size in sizes:
                key = ("bw", cell[0], size, name)
                try:
                    count, usec = calibrate(
                        lambda n, limit, path=path, cell=cell, size=size:
                        run_bw(path, cell, size, n, base_env, limit), size, args, 1)
                    bw_iters[key] = count
                    limits[key] = limit_for(count, usec / 2)
                except Failed as err:
                    res[("error",) + key] = str(err)

    for number in range(args.passes):
        for place in places:
            for cell in cells:
                for size in sizes:
                    count = iters.get((cell[0], size, place.short))
                    if count is None:
                        continue
                    order = tools[number % len(tools):] + tools[:number % len(tools)]
                    for name, path in order:
                        key = (cell[0], size, name, place.short)
                        limit = limits[(cell[0], size, place.short)]
                        record(key, lambda path=path, cell=cell, size=size, place=place:
                               run_pingpong(path, cell, size, count, place, pin, limit))
            if probe:
                for proto in ("tcp", "udp"):
                    for size in sizes:
                        key = (f"link {proto}", size, "link", place.short)
                        if key in iters:
                            record(key, lambda proto=proto, size=size, place=place:
                                   run_link(probe, proto, size, iters[key], place, pin,
                                            limits[key]))
                record(("stream", place.short), lambda place=place:
                       run_stream(probe, max(1.0, args.seconds), place, pin))
        for key, count in bw_iters.items():
            _, label, size, name = key
            cell = next(c for c in cells if c[0] == label)
            path = dict(bw_tools)[name]
            record(key, lambda path=path, cell=cell, size=size, count=count:
                   run_bw(path, cell, size, count, base_env, limits[key]))
        meta["passes_done"] = number + 1
        print(f"pass {number + 1}/{args.passes} done", file=sys.stderr)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("interrupted; processes stopped and namespaces removed", file=sys.stderr)
        sys.exit(130)
    except Failed as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(1)
