#!/usr/bin/env python3
"""Which conformance areas each provider was checked for, as a markdown table.

Runs every `capabilities_checked` test of the workspace (one per conformance suite:
a provider linked in, as a plugin, over IPv6, under a hook ...) with its output shown,
and prints one row per suite: the areas checked and the areas skipped with the reason
the provider gave (it does not claim them). docs/CONFORMANCE.md keeps the latest output.

    python3 scripts/conformance-summary.py > /tmp/table.md

Exit status: 0, or 1 if cargo failed or no suite reported.
"""

import re
import subprocess
import sys

TEST_LINE = re.compile(r"^test (\S+)::capabilities_checked \.\.\. ")
CHECKED = re.compile(r"^provider (.+?): checked \[(.*)\]$")
SKIPPED = re.compile(r"^provider (.+?): skipped ([\w-]+): (.*)$")


def main() -> int:
    cmd = ["cargo", "test", "--workspace", "capabilities_checked", "--",
           "--nocapture", "--test-threads=1"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if run.returncode != 0:
        sys.stderr.write(run.stdout[-4000:] + run.stderr[-4000:])
        return 1
    rows = []
    suite = None
    for line in run.stdout.splitlines():
        m = TEST_LINE.match(line)
        if m:
            suite = m.group(1)
            rest = line[m.end():]
            line = rest
        m = CHECKED.match(line.strip())
        if m and suite:
            rows.append({"suite": suite, "provider": m.group(1),
                         "checked": m.group(2).split(", ") if m.group(2) else [],
                         "skipped": []})
            continue
        m = SKIPPED.match(line.strip())
        if m and rows and rows[-1]["suite"] == suite:
            rows[-1]["skipped"].append((m.group(2), m.group(3)))
    if not rows:
        sys.stderr.write("no capabilities_checked output found\n")
        return 1
    print("| suite | provider | areas checked | areas skipped (not claimed) |")
    print("| --- | --- | --- | --- |")
    for r in sorted(rows, key=lambda r: r["suite"]):
        skipped = "; ".join(f"{c}" for c, _ in r["skipped"]) or "—"
        print(f"| `{r['suite']}` | `{r['provider']}` | {len(r['checked'])}: "
              f"{', '.join(r['checked'])} | {skipped} |")
    print()
    print("Why an area was skipped (first suite that skipped it, per provider):")
    print()
    seen = set()
    for r in sorted(rows, key=lambda r: r["suite"]):
        for cap, why in r["skipped"]:
            key = (r["provider"], cap)
            if key in seen:
                continue
            seen.add(key)
            print(f"- `{r['provider']}` {cap}: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
