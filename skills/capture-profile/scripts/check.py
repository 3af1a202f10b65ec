"""PASS when DIR/kernels.csv re-aggregates from the profile kept beside it; else FAIL: <reason>.

    python skills/capture-profile/scripts/check.py DIR

Reads the raw profile independently of how the CSV was made: torch.profiler's Chrome trace (DIR/profile.json:
`kernel` events, or `cpu_op` events when the run had no GPU) or the SQLite export of an Nsight Systems
report (DIR/profile.sqlite: CUPTI_ACTIVITY_KIND_KERNEL, names matched as demangled or short names). Every CSV
row must match that name's summed time (within 1% or 1 us) and instance count, its mean must equal
total / instances, and no kernel left out of the CSV may take longer than the smallest row kept.
"""

import csv
import json
import sqlite3
import sys
from collections import defaultdict
from pathlib import Path


def trace_totals(path: Path) -> dict[str, list]:
    """name -> [total ms, instances] from a Chrome trace: GPU kernels if there are any, else CPU operators."""
    events = [e for e in json.loads(path.read_text())["traceEvents"] if e.get("ph") == "X"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    totals = defaultdict(lambda: [0.0, 0])
    for e in kernels or [e for e in events if e.get("cat") == "cpu_op"]:
        totals[e["name"]][0] += e["dur"] / 1e3
        totals[e["name"]][1] += 1
    return totals


def sqlite_totals(path: Path) -> dict[str, list]:
    totals = {}
    with sqlite3.connect(path) as db:
        for column in ("shortName", "demangledName"):
            query = (
                f"SELECT s.value, SUM(k.end - k.start), COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                f"JOIN StringIds s ON s.id = k.{column} GROUP BY s.value"
            )
            totals |= {name: [ns / 1e6, n] for name, ns, n in db.execute(query)}
    return totals


def problems(folder: Path) -> list[str]:
    csv_path = folder / "kernels.csv"
    if not csv_path.exists():
        return [f"{csv_path} does not exist: run capture.py --out {folder} first"]
    if (folder / "profile.sqlite").exists():
        totals = sqlite_totals(folder / "profile.sqlite")
    elif (folder / "profile.json").exists():
        totals = trace_totals(folder / "profile.json")
    else:
        return [f"no kept profile in {folder} (profile.sqlite or profile.json)"]
    with open(csv_path, newline="") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames != ["kernel_name", "total_time_ms", "instances", "mean_time_ms"]:
            return [f"CSV header is {reader.fieldnames}, not kernel_name,total_time_ms,instances,mean_time_ms"]
        rows = list(reader)
    if not rows:
        return ["the CSV has no rows"]
    found = []
    for r in rows:
        name, total, n = r["kernel_name"], float(r["total_time_ms"]), int(r["instances"])
        mean = float(r["mean_time_ms"])
        if name not in totals:
            found.append(f"CSV row {name!r} is not in the profile")
            continue
        t, c = totals[name]
        if c != n:
            found.append(f"{name!r}: CSV says {n} instances, the profile {c}")
        if abs(t - total) > max(0.01 * t, 1e-3):
            found.append(f"{name!r}: CSV says {total:.4f} ms, the profile sums to {t:.4f} ms")
        if abs(mean * n - total) > max(0.01 * total, 1e-3):
            found.append(f"{name!r}: mean {mean} x {n} instances is not the total {total}")
    smallest = min(float(r["total_time_ms"]) for r in rows)
    names = {r["kernel_name"] for r in rows}
    missing = [n for n, (t, _) in totals.items() if n not in names and t > smallest * 1.01 + 1e-3]
    if missing:
        found.append(f"kernels longer than the smallest CSV row are missing from it: {missing[:3]}")
    return found


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: check.py DIR", file=sys.stderr)
        return 2
    found = problems(Path(sys.argv[1]))
    for reason in found:
        print(f"FAIL: {reason}")
    if not found:
        print(f"PASS (kernels.csv re-aggregates from the profile in {sys.argv[1]})")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
