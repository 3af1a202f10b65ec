"""Report Heavy Kernels: the CSV's 3 rows are the top 3 re-aggregated from the kept profile of one step.

The CSV: header `kernel_name,total_time_ms,instances,mean_time_ms`, 3 rows, numbers, sorted by total time,
mean = total / instances. The kept profile, re-aggregated by kernel name as the instruction defines it:
- a torch.profiler Chrome trace (`trace.json`, smoke and gpu1): GPU `kernel` events by duration when the trace
  has any, else CPU `cpu_op` events by self time (duration less the directly nested `cpu_op` events of the
  same thread); the trace must hold at most one `ProfilerStep#` (one profiled step);
- an nsys report (`profile.nsys-rep`, paper): `nsys stats --report cuda_gpu_kern_sum` on it (needs nsys).
Each row's name must be among the re-aggregated kernels, its total within TIME_TOL and its instances within
COUNT_TOL of theirs, and no kernel left out may be heavier than the lightest row (beyond TIME_TOL): a wrong
ranking, a made-up row or another step's numbers fail.
"""

import csv
import io
import json
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import operate_check as oc

HEADER = ["kernel_name", "total_time_ms", "instances", "mean_time_ms"]
TIME_TOL = 0.02
"""Relative (plus 0.001 ms absolute): the CSV's rounding and the profiler's own bookkeeping."""
COUNT_TOL = 0.05
"""Relative: torch.profiler's key_averages may count a few instances more or fewer than its trace holds."""


def close(a: float, b: float, rel: float) -> bool:
    return abs(a - b) <= rel * max(abs(a), abs(b)) + 1e-3


def read_csv(path: Path, failures: list[str]) -> list[tuple[str, float, int, float]] | None:
    try:
        rows = list(csv.reader(io.StringIO(path.read_text())))
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        failures.append(f"{path.name} is not a readable CSV ({e})")
        return None
    if not rows or rows[0] != HEADER:
        failures.append(f"{path.name}'s header is {rows[0] if rows else None}, not {','.join(HEADER)}")
        return None
    if len(rows) != 4:
        failures.append(f"{path.name} has {len(rows) - 1} rows, not 3")
        return None
    try:
        parsed = [(r[0], float(r[1]), int(r[2]), float(r[3])) for r in rows[1:]]
    except (ValueError, IndexError) as e:
        failures.append(f"{path.name}: a row is not name,number,integer,number ({e})")
        return None
    if [r[1] for r in parsed] != sorted((r[1] for r in parsed), reverse=True):
        failures.append(f"{path.name}'s rows are not sorted by total_time_ms, heaviest first")
    for name, total, n, mean in parsed:
        if n < 1 or not close(mean, total / n, TIME_TOL):
            failures.append(f"{path.name}: {name}'s mean_time_ms {mean} is not total_time_ms / instances")
    return parsed


def from_trace(path: Path, failures: list[str]) -> dict[str, tuple[float, int]] | None:
    try:
        events = [e for e in json.loads(path.read_text())["traceEvents"] if isinstance(e, dict)]
    except (OSError, ValueError, KeyError, TypeError) as e:
        failures.append(f"{path.name} is not a Chrome trace with traceEvents ({e!r})")
        return None
    steps = {e.get("name") for e in events if str(e.get("name", "")).startswith("ProfilerStep#")}
    if len(steps) > 1:
        failures.append(f"{path.name} holds {len(steps)} profiled steps ({sorted(steps)}); profile one")
    spans = [e for e in events if e.get("ph") == "X" and "dur" in e and "ts" in e]
    kernels = [e for e in spans if e.get("cat") == "kernel"]
    if kernels:
        totals: dict[str, list] = defaultdict(lambda: [0.0, 0])
        for e in kernels:
            totals[e["name"]][0] += e["dur"] / 1000
            totals[e["name"]][1] += 1
        return {k: tuple(v) for k, v in totals.items()}
    return cpu_self_times([e for e in spans if e.get("cat") == "cpu_op"])


def cpu_self_times(ops: list[dict]) -> dict[str, tuple[float, int]]:
    """Per name: (sum of self times in ms, count); self = duration less directly nested ops on the same thread."""
    by_thread = defaultdict(list)
    for e in ops:
        by_thread[(e.get("pid"), e.get("tid"))].append(e)
    totals: dict[str, list] = defaultdict(lambda: [0.0, 0])
    for thread in by_thread.values():
        thread.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack: list[list] = []  # open ops, outermost first: [event, duration of its direct children]
        for e in [*thread, {"ts": float("inf"), "dur": 0}]:  # the sentinel closes every op left open
            while stack and stack[-1][0]["ts"] + stack[-1][0]["dur"] <= e["ts"]:
                done, child = stack.pop()
                totals[done["name"]][0] += (done["dur"] - child) / 1000
                totals[done["name"]][1] += 1
            if stack:
                stack[-1][1] += e["dur"]
            stack.append([e, 0.0])
    return {k: tuple(v) for k, v in totals.items()}


def from_nsys(path: Path, failures: list[str]) -> dict[str, tuple[float, int]] | None:
    nsys = shutil.which("nsys")
    if nsys is None:  # the checker's own limitation, never the agent's FAIL
        print(f"re-aggregating {path.name} needs nsys on PATH (Nsight Systems)", file=sys.stderr)
        raise SystemExit(3)
    argv = [nsys, "stats", "--report", "cuda_gpu_kern_sum", "--format", "csv", "--output", "-", str(path)]
    out = subprocess.run(argv, capture_output=True, text=True)
    rows = list(csv.DictReader(io.StringIO(out.stdout[out.stdout.find("Time (%)") :])))
    if out.returncode or not rows:
        failures.append(f"nsys stats could not summarise {path.name}'s CUDA kernels: {out.stderr.strip()[-300:]}")
        return None
    return {r["Name"]: (float(r["Total Time (ns)"]) / 1e6, int(r["Instances"])) for r in rows}


def compare(rows, agg: dict[str, tuple[float, int]]) -> list[str]:
    failures = []
    for name, total, n, _ in rows:
        if name not in agg:
            failures.append(f"row {name!r} is no kernel of the kept profile")
        elif not close(total, agg[name][0], TIME_TOL) or not close(n, agg[name][1], COUNT_TOL):
            failures.append(
                f"row {name!r}: {total} ms over {n}, the profile says {agg[name][0]:.4f} ms over {agg[name][1]}"
            )
    lightest = min(r[1] for r in rows)
    listed = {r[0] for r in rows}
    heavier = [k for k, (t, _) in agg.items() if k not in listed and t > lightest * (1 + TIME_TOL) + 1e-3]
    if heavier:
        top = sorted(agg.items(), key=lambda kv: -kv[1][0])[:3]
        failures.append(f"the profile's top 3 are {[(k, round(t, 4)) for k, (t, _) in top]}; left out: {heavier[:3]}")
    return failures


def main() -> int:
    args = oc.parse_args()
    out, failures = args.workspace / "artifacts" / "heavy-kernels", []
    rows = read_csv(out / "top-kernels.csv", failures) if (out / "top-kernels.csv").is_file() else None
    if rows is None and not failures:
        failures.append("no artifacts/heavy-kernels/top-kernels.csv")
    raw = out / ("profile.nsys-rep" if args.profile == "paper" else "trace.json")
    if not raw.is_file():
        failures.append(f"the raw profile artifacts/heavy-kernels/{raw.name} was not kept")
        agg = None
    else:
        agg = from_nsys(raw, failures) if raw.suffix == ".nsys-rep" else from_trace(raw, failures)
    if rows is not None and agg:
        failures += compare(rows, agg)
    return oc.finish(failures)


if __name__ == "__main__":
    sys.exit(main())
