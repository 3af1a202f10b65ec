"""The shared checker of the new-feature tasks: run the agent's code, compare it with our reference, no judgement.

Each task's check.py names its op's reference, how to draw inputs and the tolerances, then calls `main`. The verdict
has three parts, each printing one `FAIL: <reason>` line per failed condition:
  (a) op: the function that `artifacts/feature.json` names ("op": "module.path:function", imported from the
      workspace and nowhere else) matches our reference on fresh random inputs, forward and gradients, within the
      task's tolerance per dtype (relative error ||ours - theirs|| / ||ours||);
  (b) training: the provided `verify.sh` and `train.sh`, run with the feature switched on ("enable": extra
      arguments for the provided scripts), complete with finite losses, and the losses fall (the mean of the last
      quarter of steps is below the mean of the first quarter);
  (c) liveness: `verify.sh` run twice with no extra arguments (the base configuration, same seed) gives the noise
      envelope (their largest per-step gap, never below one unit of the last printed digit); with "enable" the
      losses leave 3x that envelope, with "disable" they stay inside it (the switch is off by default and turning
      it off restores the base path).
(b) and (c) run only once (a) passes: they take minutes, and the verdict is already FAIL otherwise.
A workspace that cannot be run is the agent's FAIL; a bug here is a traceback, which the harness reports as ERROR.
Checkers run with the harness's Python (torch installed); the provided scripts run with the workspace's.
"""

import argparse
import importlib
import importlib.util
import json
import math
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path

import torch

# A training log's per-step loss lines, per framework (the provided scripts make every step print one).
LOSS_LINE = {
    "pithtrain": re.compile(r"^step (\d+)/\d+ loss (\S+)"),
    "torchtitan": re.compile(r"step:\s*(\d+)\s+loss:\s*(\S+)"),
    "megatron-lm": re.compile(r"iteration\s+(\d+)/\s*\d+ .*?lm loss: (\S+)"),
}
ANSI = re.compile(r"\x1b\[[0-9;]*m")
ENVELOPE_FLOOR = 1e-6  # two identical CPU runs agree exactly; this keeps a zero envelope from failing rounding
ENVELOPE_MULTIPLE = 3.0  # "outside the envelope" means beyond 3x the base-vs-base gap


@dataclass(frozen=True)
class OpSpec:
    reference: Callable
    """Our eager reference (the task folder's reference.py)."""
    make_inputs: Callable[[torch.Generator, torch.dtype], tuple[list, dict]]
    """Fresh random (args, kwargs) for one trial; float tensors that require grad get gradients compared."""
    tolerance: dict[torch.dtype, float]
    """Largest relative error allowed, forward and each gradient, per input dtype."""
    outputs: Callable[[object], list[torch.Tensor]] = lambda out: [out]
    """The differentiable outputs of one call (e.g. the first of a tuple)."""


def load_reference(task_dir: Path):
    """The task folder's reference.py, under a name of its own (four tasks' references can share one process)."""
    name = "reference_" + re.sub(r"\W", "_", task_dir.name)
    spec = importlib.util.spec_from_file_location(name, task_dir / "reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rel(ours: torch.Tensor, theirs: torch.Tensor) -> float:
    ours, theirs = ours.detach().double(), theirs.detach().double()
    if ours.shape != theirs.shape:
        return math.inf
    if not torch.isfinite(theirs).all():
        return math.inf
    return float((ours - theirs).norm() / ours.norm().clamp(min=1e-30))


def load_feature_json(workspace: Path) -> tuple[dict, list[str]]:
    path = workspace / "artifacts" / "feature.json"
    if not path.is_file():
        return {}, ["artifacts/feature.json is missing"]
    try:
        data = json.loads(path.read_text())
    except ValueError as e:
        return {}, [f"artifacts/feature.json is not valid JSON: {e}"]
    problems = []
    if not isinstance(data, dict):
        return {}, ["artifacts/feature.json must be an object with op, enable and disable"]
    if not isinstance(data.get("op"), str) or not re.fullmatch(r"[\w.]+:\w+", data.get("op", "")):
        problems.append(f'artifacts/feature.json "op" must be "module.path:function", got {data.get("op")!r}')
    for key in ("enable", "disable"):
        if not isinstance(data.get(key), list) or not all(isinstance(a, str) for a in data.get(key, [None])):
            problems.append(f'artifacts/feature.json "{key}" must be a list of arguments, got {data.get(key)!r}')
    return data, problems


def import_op(workspace: Path, target: str) -> tuple[Callable | None, list[str]]:
    module_name, func_name = target.split(":")
    top = module_name.split(".")[0]
    for name in [m for m in sys.modules if m == top or m.startswith(top + ".")]:
        del sys.modules[name]  # an installed copy of the framework must not stand in for the workspace's
    sys.path.insert(0, str(workspace))
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # the agent's module fails to import: the agent's failure, with the reason
        return None, [f"op: importing {module_name} failed: {type(e).__name__}: {e}"]
    finally:
        sys.path.remove(str(workspace))
    origin = Path(getattr(module, "__file__", "") or "").resolve()
    if workspace.resolve() not in origin.parents:
        return None, [f"op: {module_name} was imported from {origin}, not from the workspace"]
    func = getattr(module, func_name, None)
    if not callable(func):
        return None, [f"op: {module_name} has no function {func_name}"]
    return func, []


def check_op(op: Callable, spec: OpSpec, trials: int = 3) -> list[str]:
    problems = []
    seed = int.from_bytes(os.urandom(4), "little")  # fresh inputs every check; the seed is printed on failure
    for dtype, tol in spec.tolerance.items():
        for trial in range(trials):
            gen = torch.Generator().manual_seed(seed + trial)
            args, kwargs = spec.make_inputs(gen, dtype)
            leaves = [a for a in list(args) + list(kwargs.values()) if torch.is_tensor(a) and a.requires_grad]
            ours = spec.outputs(spec.reference(*args, **kwargs))
            clones = [a.detach().clone().requires_grad_(a.requires_grad) if torch.is_tensor(a) else a for a in args]
            kw_clones = {
                k: (v.detach().clone().requires_grad_(v.requires_grad) if torch.is_tensor(v) else v)
                for k, v in kwargs.items()
            }
            try:
                theirs = spec.outputs(op(*clones, **kw_clones))
            except Exception as e:
                return [f"op: calling it raised {type(e).__name__}: {e} (dtype {dtype}, seed {seed + trial})"]
            if len(theirs) != len(ours):
                return [f"op: returned {len(theirs)} outputs, the reference {len(ours)}"]
            for i, (o, t) in enumerate(zip(ours, theirs)):
                err = _rel(o, t) if torch.is_tensor(t) else math.inf
                if not err <= tol:
                    problems.append(
                        f"op: output {i} differs from the reference by {err:.2e} > {tol:.0e} "
                        f"({dtype}, seed {seed + trial})"
                    )
            if problems:
                return problems
            grads_out = [torch.randn(o.shape, generator=gen, dtype=torch.float64).to(o.dtype) for o in ours]
            their_leaves = [
                a for a in list(clones) + list(kw_clones.values()) if torch.is_tensor(a) and a.requires_grad
            ]
            ref_grads = torch.autograd.grad(ours, leaves, grads_out, allow_unused=True)
            try:
                op_grads = torch.autograd.grad(theirs, their_leaves, grads_out, allow_unused=True)
            except RuntimeError as e:
                return [f"op: its outputs are not differentiable: {e}"]
            for i, (r, g) in enumerate(zip(ref_grads, op_grads)):
                if r is None:
                    continue
                err = _rel(r, g) if g is not None else math.inf
                if not err <= tol:
                    problems.append(
                        f"op: gradient of input {i} differs from the reference by {err:.2e} > {tol:.0e} "
                        f"({dtype}, seed {seed + trial})"
                    )
            if problems:
                return problems
    return problems


def run_script(
    workspace: Path, script: str, args: list[str], framework: str, timeout_s: float
) -> tuple[list[str], str]:
    """Run a provided script; return its per-step losses as printed in the log it wrote, or a reason it gave none."""
    artifacts = workspace / "artifacts"
    before = set(artifacts.glob(f"{Path(script).stem}-*.log")) if artifacts.is_dir() else set()
    try:
        env = {**os.environ, "PYTHON": os.environ.get("PYTHON", sys.executable)}  # the provided scripts' Python
        done = subprocess.run(
            ["bash", script, *args], cwd=workspace, env=env, capture_output=True, text=True, timeout=timeout_s
        )
    except subprocess.TimeoutExpired:
        return [], f"{script} {' '.join(args)} ran past {timeout_s:.0f} s"
    time.sleep(1.1)  # logs are named by the second: the next run must not append to this one's
    new = sorted(set(artifacts.glob(f"{Path(script).stem}-*.log")) - before) if artifacts.is_dir() else []
    if done.returncode != 0:
        return [], f"{script} {' '.join(args)} exited {done.returncode}: {(done.stdout + done.stderr)[-400:]!r}"
    if not new:
        return [], f"{script} wrote no artifacts/{Path(script).stem}-<stamp>.log"
    text = ANSI.sub("", new[-1].read_text(errors="replace"))
    if "exit-time:" not in text:
        return [], f"{new[-1].name} has no exit-time line"
    losses = {int(m.group(1)): m.group(2) for line in text.splitlines() if (m := LOSS_LINE[framework].search(line))}
    if not losses:
        return [], f"{new[-1].name} shows no loss lines"
    try:
        [Decimal(losses[s]) for s in losses]
    except InvalidOperation:
        return [], f"{new[-1].name} has a loss that is not a number"
    return [losses[s] for s in sorted(losses)], ""


def printed_resolution(*curves: list[str]) -> float:
    """One unit of the last digit the logs print (1e-4 for "7.6415"): two runs that differ by less than that can
    print losses a unit apart, so the envelope is never narrower than this."""
    return max(10.0 ** Decimal(s).as_tuple().exponent for curve in curves for s in curve if Decimal(s).is_finite())


def check_training(workspace: Path, framework: str, feature: dict, timeout_s: float) -> list[str]:
    problems = []
    curves = {}
    for script in ("verify.sh", "train.sh"):
        printed, why = run_script(workspace, script, feature["enable"], framework, timeout_s)
        if why:
            problems.append(f"training: {why}")
            continue
        losses = [float(s) for s in printed]
        if not all(math.isfinite(x) for x in losses):
            problems.append(f"training: {script} with the feature on has a non-finite loss: {losses}")
            continue
        q = max(1, len(losses) // 4)
        if len(losses) < 2 or not sum(losses[-q:]) / q < sum(losses[:q]) / q:
            problems.append(
                f"training: {script} with the feature on: losses do not fall ({losses[0]:.4f} -> {losses[-1]:.4f})"
            )
        curves[script] = printed
    runs = [run_script(workspace, "verify.sh", args, framework, timeout_s) for args in ([], [], feature["disable"])]
    (base1, why1), (base2, why2), (off, why3) = runs
    for why in (why1, why2, why3):
        if why:
            problems.append(f"liveness: {why}")
    if problems or "verify.sh" not in curves:
        return problems
    resolution = printed_resolution(base1, base2, off, curves["verify.sh"])
    on, base1, base2, off = ([float(s) for s in c] for c in (curves["verify.sh"], base1, base2, off))
    envelope = max(ENVELOPE_FLOOR, resolution, max(abs(a - b) for a, b in zip(base1, base2)))
    on_gap = max(abs(a - b) for a, b in zip(on, base1))
    off_gap = max(abs(a - b) for a, b in zip(off, base1))
    if not on_gap > ENVELOPE_MULTIPLE * envelope:
        problems.append(
            f"liveness: with the feature on, the losses stay within the base envelope (gap {on_gap:.2e}, "
            f"envelope {envelope:.2e}): the switch changes nothing"
        )
    if not off_gap <= ENVELOPE_MULTIPLE * envelope:
        problems.append(
            f"liveness: with the feature off, the losses leave the base envelope (gap {off_gap:.2e}, "
            f"envelope {envelope:.2e}): the base path changed"
        )
    return problems


def main(spec: OpSpec) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--workspace", type=Path, required=True)
    p.add_argument("--framework", required=True, choices=list(LOSS_LINE))
    p.add_argument("--answer", type=Path)
    p.add_argument("--profile", required=True)
    p.add_argument("--timeout-s", type=float, default=1200.0, help="per provided-script run")
    a = p.parse_args()
    feature, problems = load_feature_json(a.workspace)
    if not problems:
        op, problems = import_op(a.workspace, feature["op"])
        if op is not None:
            problems += check_op(op, spec)
    if problems:  # training takes minutes; a verdict already FAIL does not wait for it
        problems.append("training and liveness: not checked, since the op check failed")
    else:
        problems = check_training(a.workspace, a.framework, feature, a.timeout_s)
    for line in problems:
        print(f"FAIL: {line}")
    if not problems:
        print("PASS")
    return 1 if problems else 0
