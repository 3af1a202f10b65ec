"""How often each feature checker FAILs its own gold (the false-FAIL rate), measured on this machine.

    python tasks/feature/measure_false_fail.py --op-checks 1000 --liveness 20 --profile smoke
    python tasks/feature/measure_false_fail.py --op-checks 0 --pool 6 4 --profile gpu1 --tasks 02-dynmoe

--op-checks N: N full op checks of each gold's op (check_op: 3 trials per dtype, a fresh seed each), with the
largest error seen per dtype. --liveness M: M independent liveness checks, check i at training.seed 1234 + i
(verify.sh with the feature on, recorded by the seam probe and judged, three base runs and one off run, judged as
check.py does). --pool B O: B base runs and O off runs once, then every choice of three base runs and one off run
is judged (C(B,3) x O liveness verdicts from B + O + 1 runs, for a GPU's budget; they share runs, so they are not
independent). One line per task and part; exit 1 if any check FAILed.
"""

import argparse
import importlib.util
import itertools
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

FEATURE = Path(__file__).resolve().parent
REPO = FEATURE.parent.parent
sys.path.insert(0, str(FEATURE))
import feature_check  # noqa: E402

TASKS = ("01-moba", "02-dynmoe", "03-diff-attention", "04-moe-plus-plus")
PROVIDED_SEED = 1234  # training.seed of every profile's provided config


def load_check(task: str):
    spec = importlib.util.spec_from_file_location(f"check_{task.replace('-', '_')}", FEATURE / task / "check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def gold_workspace(task: str, profile: str, root: Path) -> Path:
    """The committed tree with the task's provided scripts and its gold applied, as the harness makes it."""
    ws = root / task
    ws.mkdir(parents=True)
    tar = subprocess.run(["git", "-C", str(REPO), "archive", "HEAD"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(ws)], input=tar, check=True)
    shutil.copytree(FEATURE / "provided" / profile / "pithtrain", ws, dirs_exist_ok=True)
    gold = FEATURE / task / "gold" / "pithtrain"
    env = {**os.environ, "GOLD_DIR": str(gold), "ATE_PROFILE": profile}
    subprocess.run(["bash", str(gold / "solve.sh")], cwd=ws, env=env, check=True, capture_output=True)
    return ws


def measure_ops(task: str, ws: Path, checks: int) -> bool:
    """The op's checks, and the aux function's where the task names one (a line each)."""
    spec = load_check(task).SPEC
    feature, _ = feature_check.load_feature_json(ws, spec.aux is not None)
    ok = True
    for key, key_spec in (("op", spec), ("aux", spec.aux)):
        if key_spec is None:
            continue
        op, problems = feature_check.import_op(ws, feature[key])
        assert op is not None, problems
        failures, worst = 0, {dtype: 0.0 for dtype in key_spec.tolerance}
        for _ in range(checks):
            seed = int.from_bytes(os.urandom(4), "little")
            failed = False
            for dtype, tol in key_spec.tolerance.items():
                for trial in range(3):
                    errors, why = feature_check.op_errors(op, key_spec, seed + trial, dtype)
                    worst[dtype] = max(worst[dtype], *errors.values()) if not why else float("inf")
                    failed |= bool(why) or not max(errors.values()) <= tol
            failures += failed
        seen = ", ".join(
            f"{str(d).removeprefix('torch.')} worst {e:.2e} (tolerance {key_spec.tolerance[d]:.0e})"
            for d, e in worst.items()
        )
        print(f"{task} {key}: {checks} checks, {failures} FAIL; {seen}; {machine()}", flush=True)
        ok &= failures == 0
    return ok


def verify(ws: Path, args: list[str], env: dict | None = None) -> list[str]:
    printed, why = feature_check.run_script(ws, "verify.sh", args, "pithtrain", 1200, env)
    assert not why, why
    return printed


def seam_run(task: str, ws: Path, feature: dict, profile: str) -> tuple[list[str], list[str]]:
    """verify.sh with the feature on under the seam probe: its losses and the seam verdict (with the task's branch
    run, where it has one, as the checker runs it)."""
    spec, check_py = load_check(task).SPEC, str(FEATURE / task / "check.py")
    with tempfile.TemporaryDirectory(prefix="feature-seam-") as seam_dir:
        on = verify(ws, feature["enable"], feature_check.seam_env(feature, check_py, seam_dir, spec))
        seam = feature_check.check_seam(Path(seam_dir), spec, feature["op"], profile, feature.get("aux", ""))
    if spec.branch_args is not None:
        seam += feature_check.check_branch(ws, "pithtrain", feature, 1200, spec, check_py, profile)
    return on, seam


def measure_liveness(task: str, ws: Path, checks: int, profile: str) -> bool:
    """Check i trains every run with seed PROVIDED_SEED + i: a CPU run is bitwise reproducible, so checks at one
    seed would repeat one outcome."""
    feature, _ = feature_check.load_feature_json(ws)
    failures, reasons = 0, []
    for i in range(checks):
        seed = ["--set", f"training.seed={PROVIDED_SEED + i}"]
        on, seam = seam_run(task, ws, {**feature, "enable": feature["enable"] + seed}, profile)
        bases = [verify(ws, seed) for _ in range(feature_check.BASE_RUNS)]
        off = verify(ws, feature["disable"] + seed)
        problems = seam + feature_check.liveness(on, bases, off, feature_check.LATER_STEP_NOISE[profile])
        failures += bool(problems)
        reasons += problems
        print(f"{task} seam+liveness check, seed {PROVIDED_SEED + i}: {problems or 'PASS'}", flush=True)
    print(f"{task} seam+liveness: {checks} checks, {failures} FAIL {reasons[:2]}; {machine()}", flush=True)
    return failures == 0


def measure_pool(task: str, ws: Path, n_base: int, n_off: int, profile: str) -> bool:
    feature, _ = feature_check.load_feature_json(ws)
    on, seam = seam_run(task, ws, feature, profile)
    bases = [verify(ws, []) for _ in range(n_base)]
    offs = [verify(ws, feature["disable"]) for _ in range(n_off)]
    noise = feature_check.LATER_STEP_NOISE[profile]
    verdicts = [
        feature_check.liveness(on, list(b), off, noise) for b in itertools.combinations(bases, 3) for off in offs
    ]
    failures = sum(bool(v) for v in verdicts)
    gaps = sorted(
        feature_check._gap([float(x) for x in a], [float(x) for x in b])
        for a, b in itertools.combinations(bases + offs, 2)
    )
    print(
        f"{task} pool: seam {seam or 'PASS'}; {len(verdicts)} liveness verdicts from {n_base} base + {n_off} off "
        f"+ 1 on runs, {failures} FAIL; base-path gaps {', '.join(f'{g:.1e}' for g in gaps)}; {machine()}",
        flush=True,
    )
    # Every run's printed losses, step by step: where in the run the base path drifts (GPU noise grows with steps)
    print(f"{task} pool losses: on {on}; base {[list(b) for b in bases]}; off {[list(o) for o in offs]}", flush=True)
    return failures == 0 and not seam


def machine() -> str:
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else f"CPU ({os.cpu_count()} cores)"
    return f"{platform.node()}, {gpu}, torch {torch.__version__}, {time.strftime('%Y-%m-%d', time.gmtime())}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", nargs="+", default=list(TASKS), choices=TASKS)
    p.add_argument("--profile", default="smoke", choices=["smoke", "gpu1"])
    p.add_argument("--op-checks", type=int, default=1000)
    p.add_argument("--liveness", type=int, default=0)
    p.add_argument("--pool", type=int, nargs=2, metavar=("BASE", "OFF"))
    a = p.parse_args()
    ok = True
    with tempfile.TemporaryDirectory(prefix="feature-false-fail-") as root:
        for task in a.tasks:
            ws = gold_workspace(task, a.profile, Path(root))
            if a.op_checks:
                ok &= measure_ops(task, ws, a.op_checks)
            if a.liveness:
                ok &= measure_liveness(task, ws, a.liveness, a.profile)
            if a.pool:
                ok &= measure_pool(task, ws, *a.pool, a.profile)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
