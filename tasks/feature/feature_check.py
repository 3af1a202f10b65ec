"""The shared checker of the new-feature tasks: run the agent's code, compare it with our reference, no judgement.

Each task's check.py gives, as SPEC, its op's reference, inputs that reach every rule, tolerances, and what to
record and judge at the model's seam, then calls `main`. The verdict has four parts, each gating the next and
printing one `FAIL: <reason>` line per failed condition:
  (a) op: the function that `artifacts/feature.json` names ("op": "module.path:function", imported from the
      workspace and nowhere else) matches our reference on fresh inputs, forward and gradients, within the task's
      tolerance per dtype (`op_errors`: relative error, a gradient's against its size under three random output
      gradients; low precision against the reference in float64); likewise a second function where the task names
      one ("aux", DynMoE's auxiliary loss);
  (b) seam: `verify.sh` runs with the feature switched on ("enable": extra arguments for the provided scripts) and
      `seam_probe/` on PYTHONPATH, whose sitecustomize.py wraps the named op as its module is imported and records
      every call the model makes (the task's `record_call`, in the trainer); the checker replays the first calls'
      real inputs through op and reference in float32 and holds the calls to the paper's rules (`judge_calls`:
      the arguments per layer, trainable inputs that receive gradients, outputs the model uses; where a task needs
      them, the calling layer's own submodule outputs, read through `calling_modules`);
  (c) training: that verify.sh run and `train.sh` with "enable" complete with finite losses that fall (the mean of
      the last quarter of steps is below the mean of the first quarter);
  (d) liveness: `verify.sh` run three times with no extra arguments (the base configuration, same seed). Step 1
      (the forward at initialisation, before any update) is reproducible on every machine: there, the envelope is
      the base runs' spread, never below one unit of the last printed digit. Later steps are reproducible on a CPU
      but not on a GPU, whose backward is not bitwise deterministic: there, the envelope is the largest gap of any
      two base runs, never below one unit nor below the profile's measured noise (`LATER_STEP_NOISE`). With
      "disable" the losses stay within the envelope at step 1 and within 3x of it later, from the nearest base run
      (the switch is off by default and turning it off restores the base path); with "enable" they leave it, at
      step 1 or by 3x later, from every base run. The base and "disable" runs run under the seam probe too and
      must not call the op at all: off by default means the feature does not run (revision 5).
A workspace that cannot be run is the agent's FAIL; a bug here is a traceback, which the harness reports as ERROR.
Checkers run with the harness's Python (torch installed); the provided scripts run with the workspace's.
"""

import argparse
import atexit
import functools
import importlib
import importlib.abc
import importlib.util
import inspect
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
import weakref
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
BASE_RUNS = 3  # the envelope is the largest gap among three base runs: two gave one sample of a GPU's noise
# After step 1, a GPU's runs drift apart (not bitwise reproducible backward), and three base runs that happen to agree
# give an envelope narrower than the noise: 16 base and off runs of the gpu1 profile on one H200 (2d7227a,
# results/ate/gpu1/20261202T1158Z-feature-gpu1-liveness.log) were at most 3.1e-3 apart at losses near 11, 2.9e-4 of
# the loss; with no floor, 257 of 7,280 choices of three base runs and one other failed a correct off run at 3x. A
# CPU's runs are identical: its profile has no floor, so every step is held to the printed digit.
LATER_STEP_NOISE = {"smoke": 0.0, "gpu1": 3e-4, "paper": 3e-4}  # relative to the loss, steps 2 on
GRAD_DRAWS = 3  # random output gradients whose reference gradients give each input gradient's scale
LAYERS = {"smoke": 4, "gpu1": 4, "paper": 27}  # num_hidden_layers of each profile's provided model (every task's)
SEAM_PROBE = Path(__file__).resolve().parent / "seam_probe"  # its sitecustomize.py wraps the op in the trainer
SEAM_REPLAY_CALLS = 8  # per process, the first calls (the first step's) are replayed through op and reference


@dataclass(frozen=True)
class OpSpec:
    reference: Callable
    """Our eager reference (the task folder's reference.py)."""
    make_inputs: Callable[[torch.Generator, torch.dtype], tuple[list, dict]]
    """Fresh random (args, kwargs) for one trial; float tensors that require grad get gradients compared."""
    tolerance: dict[torch.dtype, float]
    """Largest relative error allowed, forward and each gradient, per input dtype."""
    outputs: Callable[[object], list[torch.Tensor]]
    """The differentiable outputs of one call (e.g. both of a tuple)."""
    record_call: Callable[[dict, Callable, dict, object], None]
    """In the trainer, per call of the agent's op from the model: (record, op, arguments by the reference's
    parameter names, result) -> fills the record with numbers (and may hook gradients that fill it later)."""
    judge_calls: Callable[[list[dict], str], list[str]]
    """In the checker: (every recorded call, the profile) -> one reason per rule of the paper the model broke."""
    aux: "OpSpec | None" = None
    """A second function the instruction names (feature.json "aux"), checked and recorded like the op: DynMoE's
    auxiliary loss, whose value the op's gradients cannot show; MoE++'s FFN weights, used outside the op."""
    aux_needed: Callable[[list[dict]], bool] | None = None
    """Whether the op's recorded calls oblige the model to call the aux function too (None: always)."""
    branch_args: dict[str, list[str]] | None = None
    """Per framework, the verify.sh arguments of one more run with the feature on, on a model whose routing reaches
    a rule that a profile's own model may never reach (MoE++: a token routed to zero-computation experts only, which
    top-6 of 64 with 4 of them cannot be); its calls are judged by `judge_branch`, on every profile."""
    judge_branch: Callable[[list[dict], str], list[str]] | None = None


def load_reference(task_dir: Path):
    """The task folder's reference.py, under a name of its own (four tasks' references can share one process)."""
    name = "reference_" + re.sub(r"\W", "_", task_dir.name)
    spec = importlib.util.spec_from_file_location(name, task_dir / "reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rel_error(ours: torch.Tensor, theirs: torch.Tensor, scale: float | None = None) -> float:
    """||ours - theirs|| / scale (default ||ours||); inf for a wrong shape or a non-finite answer."""
    ours, theirs = ours.detach().double(), theirs.detach().double()
    if ours.shape != theirs.shape:
        return math.inf
    if not torch.isfinite(theirs).all():
        return math.inf
    return float((ours - theirs).norm() / max(float(ours.norm()) if scale is None else scale, 1e-30))


def load_feature_json(workspace: Path, needs_aux: bool = False) -> tuple[dict, list[str]]:
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
    for key in ("op", "aux") if needs_aux else ("op",):
        if not isinstance(data.get(key), str) or not re.fullmatch(r"[\w.]+:\w+", data.get(key, "")):
            problems.append(f'artifacts/feature.json "{key}" must be "module.path:function", got {data.get(key)!r}')
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


def _copies(values, dtype=None) -> list:
    """Fresh leaves (same requires_grad), cast to `dtype` when given; non-tensors as they are."""
    return [
        (v.detach().to(dtype or v.dtype).clone().requires_grad_(v.requires_grad) if torch.is_tensor(v) else v)
        for v in values
    ]


def op_errors(op: Callable, spec: OpSpec, seed: int, dtype: torch.dtype) -> tuple[dict[str, float], str]:
    """One trial: the op on fresh inputs of `dtype` against the reference, {output i / gradient of input i: relative
    error}, or a reason the op gave no comparable answer. A low-precision trial is compared with the reference on
    float64 copies of the same inputs (the truth, not our own rounding); a float32 one with the reference in float32,
    so a discrete choice (top-k, a threshold) is made on the very same numbers."""
    gen = torch.Generator().manual_seed(seed)
    args, kwargs = spec.make_inputs(gen, dtype)
    values = list(args) + list(kwargs.values())
    ref_values = _copies(values, torch.float64 if torch.finfo(dtype).bits < 32 else None)
    their_values = _copies(values)
    ours = spec.outputs(spec.reference(*ref_values[: len(args)], **dict(zip(kwargs, ref_values[len(args) :]))))
    try:
        theirs = spec.outputs(op(*their_values[: len(args)], **dict(zip(kwargs, their_values[len(args) :]))))
    except Exception as e:
        return {}, f"calling it raised {type(e).__name__}: {e}"
    if len(theirs) != len(ours):
        return {}, f"returned {len(theirs)} outputs, the reference {len(ours)}"
    errors = {
        f"output {i}": rel_error(o, t) if torch.is_tensor(t) else math.inf for i, (o, t) in enumerate(zip(ours, theirs))
    }
    # A gradient's error is taken against its size under GRAD_DRAWS random output gradients (the largest): one that
    # sums a whole map with cancellation (lambda's in differential attention) is near 0 for some draws, where a
    # relative error would measure the draw, not the op.
    draws = [[torch.randn(o.shape, generator=gen, dtype=torch.float64) for o in ours] for _ in range(GRAD_DRAWS)]
    ref_leaves = [v for v in ref_values if torch.is_tensor(v) and v.requires_grad]
    their_leaves = [v for v in their_values if torch.is_tensor(v) and v.requires_grad]
    ref_grads = [
        torch.autograd.grad(
            ours, ref_leaves, [g.to(o.dtype) for g, o in zip(gs, ours)], retain_graph=True, allow_unused=True
        )
        for gs in draws
    ]
    try:
        grads_out = [g.to(t.dtype) for g, t in zip(draws[0], theirs)]
        their_grads = torch.autograd.grad(theirs, their_leaves, grads_out, allow_unused=True)
    except RuntimeError as e:
        return {}, f"its outputs are not differentiable: {e}"
    for i, (r, g) in enumerate(zip(ref_grads[0], their_grads)):
        if r is not None:
            scale = max(float(grads[i].double().norm()) for grads in ref_grads)
            errors[f"gradient of input {i}"] = rel_error(r, g, scale) if g is not None else math.inf
    return errors, ""


def check_op(op: Callable, spec: OpSpec, trials: int = 3, label: str = "op") -> list[str]:
    seed = int.from_bytes(os.urandom(4), "little")  # fresh inputs every check; the seed is printed on failure
    for dtype, tol in spec.tolerance.items():
        for trial in range(trials):
            errors, why = op_errors(op, spec, seed + trial, dtype)
            if why:
                return [f"{label}: {why} (dtype {dtype}, seed {seed + trial})"]
            problems = [
                f"{label}: {what} differs from the reference by {err:.2e} > {tol:.0e} ({dtype}, seed {seed + trial})"
                for what, err in errors.items()
                if not err <= tol
            ]
            if problems:
                return problems
    return []


# The seam probe, part 1 (in the trainer process, from seam_probe/sitecustomize.py).


def grad_probe(record: dict, key: str, tensor, count_unused: bool = False) -> None:
    """record[key]: whether `tensor` requires grad; record[key + "_grad"]: the largest |gradient| it received, and
    record[key + "_zero_rows"]: how many rows (all dims but the last) got an all-zero gradient in the latest
    backward; both are filled in by the backward (0 and None until one reaches the tensor). With `count_unused`,
    record[key + "_unused"]: the most entries of one backward whose value is not 0 but whose gradient is (a value
    the model computed and then left out of the loss)."""
    record[key] = bool(torch.is_tensor(tensor) and tensor.requires_grad)
    record[key + "_grad"], record[key + "_zero_rows"] = 0.0, None
    nonzero = tensor.detach() != 0 if count_unused and record[key] else None
    if count_unused:
        record[key + "_unused"] = None

    def hook(g):
        try:  # never break the model's backward: a failure here is reported by the checker
            if nonzero is not None:
                record[key + "_unused"] = max(record[key + "_unused"] or 0, int((nonzero & (g == 0)).sum()))
            g = g.detach().reshape(-1, g.shape[-1]) if g.dim() else g.detach().reshape(1, 1)
            record[key + "_grad"] = max(record[key + "_grad"], float(g.abs().max()))
            record[key + "_zero_rows"] = int((g == 0).all(-1).sum())
        except Exception as e:
            record["error"] = f"recording the gradient of {key}: {type(e).__name__}: {e}"

    if record[key]:
        tensor.register_hook(hook)


def replay_error(op: Callable, spec: OpSpec, arguments: dict) -> float:
    """The op and the reference on float32 CPU copies of one call's arguments (no autograd): the largest relative
    error of any output. float32 is the precision every task's tolerance is sharp in, and the CPU the machine its
    op checks measured: a GPU's matmuls may order a sum differently in the op and in the reference, and one top-k
    flipped at a near tie among a gpu1 step's 65,536 queries would read as an error."""
    f32 = [
        (v.detach().float() if v.is_floating_point() else v).cpu() if torch.is_tensor(v) else v
        for v in arguments.values()
    ]
    with torch.no_grad(), torch.autocast("cpu", enabled=False):
        ours, theirs = spec.outputs(spec.reference(*f32)), spec.outputs(op(*f32))
    if len(ours) != len(theirs):
        return math.inf
    return max(rel_error(o, t) if torch.is_tensor(t) else math.inf for o, t in zip(ours, theirs))


_CALLER: list = [None]  # the frame that called the op, while its call is recorded (calling_modules reads it)
_WATCHED = weakref.WeakKeyDictionary()  # module -> its hooks and its submodules' outputs in its latest forward
WATCH_CHECKS = 3  # a watched module's submodule outputs are read in this many of its calls, then unhooked


def calling_modules(limit: int = 2) -> list:
    """The nn.Modules whose methods are on the stack that called the op, nearest first (the `self` of each frame),
    those with submodules only: the layer that computed the op's inputs, whatever the framework names it."""
    found, frame = [], _CALLER[0]
    while frame is not None and len(found) < limit:
        module = frame.f_locals.get("self")
        if isinstance(module, torch.nn.Module) and any(True for _ in module.children()) and module not in found:
            found.append(module)
        frame = frame.f_back
    return found


def submodule_outputs(module) -> list[torch.Tensor] | None:
    """The tensors `module`'s submodules returned in its current forward; None at the first call from it (the hooks
    are installed then, and fill from its next forward on) and after WATCH_CHECKS reads (unhooked)."""
    watch = _WATCHED.get(module)
    if watch is None:
        outputs: list[torch.Tensor] = []

        def keep(_m, _args, out):
            outs = out if isinstance(out, (tuple, list)) else (out,)
            outputs.extend(t.detach() for t in outs if torch.is_tensor(t))

        handles = [module.register_forward_pre_hook(lambda _m, _args: outputs.clear())]
        handles += [sub.register_forward_hook(keep) for sub in module.modules() if sub is not module]
        _WATCHED[module] = {"outputs": outputs, "handles": handles, "reads": 0}
        return None
    if watch["reads"] >= WATCH_CHECKS:
        return None
    watch["reads"] += 1
    found = list(watch["outputs"])
    if watch["reads"] == WATCH_CHECKS:
        for handle in watch["handles"]:
            handle.remove()
        watch["outputs"].clear()
    return found


def run_factor(vec: torch.Tensor, outputs: list[torch.Tensor]) -> float | None:
    """c such that `vec` is c times a contiguous run of one of `outputs` (flattened), the run found by its cosine
    with `vec` (at least 1 - 1e-4, float64); None when no output holds such a run. Tells whether the op got a
    projection's values as they are, or scaled."""
    v = vec.detach().double().flatten().cpu()
    if not v.norm() > 0:
        return None
    best, factor, n = 1 - 1e-4, None, v.numel()
    for out in outputs:
        if not out.is_floating_point() or out.numel() < n:
            continue
        flat = out.detach().double().flatten()
        m = flat.numel() - n + 1  # windows flat[i : i + n]; n shifted sums, exact in float64
        dots = sum(float(v[j]) * flat[j : j + m] for j in range(n))
        norms = sum(flat[j : j + m] ** 2 for j in range(n))
        cos = dots / (norms.sqrt() * float(v.norm())).clamp(min=1e-300)
        i = int(cos.argmax())
        if float(cos[i]) > best:
            run = flat[i : i + n].cpu()
            best, factor = float(cos[i]), float(v @ run / (run @ run))
    return factor


def _probe_call(op: Callable, spec: OpSpec, calls: list[dict], args: tuple, kwargs: dict, out) -> None:
    record = {"call": len(calls), "pid": os.getpid()}
    calls.append(record)
    try:
        bound = inspect.signature(op).bind(*args, **kwargs)
        bound.apply_defaults()
        names = list(inspect.signature(spec.reference).parameters)  # the instruction fixes the order, not the names
        arguments = dict(zip(names, bound.arguments.values()))
        spec.record_call(record, op, arguments, out)
        if record["call"] < SEAM_REPLAY_CALLS:
            record["replay_error"] = replay_error(op, spec, arguments)
    except Exception as e:  # reported by the checker as the op misbehaving on the model's own inputs
        record["error"] = f"{type(e).__name__}: {e}"


class _WrapOnImport(importlib.abc.MetaPathFinder):
    """Wraps `function` of `module_name` right after that module runs: every later `module.function` lookup and
    every `from module import function` gets the wrapper (a copy bound during the module's own run does not)."""

    def __init__(self, module_name: str, wrap: Callable):
        self.module_name, self.wrap = module_name, wrap

    def find_spec(self, fullname, path, target=None):
        if fullname != self.module_name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            exec_module = spec.loader.exec_module

            def exec_and_wrap(module):
                exec_module(module)
                self.wrap(module)

            spec.loader.exec_module = exec_and_wrap
        return spec


def recording(op: Callable, spec: OpSpec, calls: list[dict]) -> Callable:
    """`op`, recording each call into `calls` (the seam probe's wrapper)."""

    @functools.wraps(op)
    def recorded(*args, **kwargs):
        out = op(*args, **kwargs)
        _CALLER[0] = sys._getframe(1)
        try:
            _probe_call(op, spec, calls, args, kwargs, out)
        finally:
            _CALLER[0] = None  # no frame kept alive
        return out

    return recorded


def install_seam_probe(spec: OpSpec, target: str, out_dir: str, name: str = "seam") -> None:
    """Record every call of `target` ("module.path:function") made in this process; write them to
    out_dir/<name>-<pid>.json at exit."""
    module_name, func_name = target.split(":")
    calls: list[dict] = []

    def wrap(module):
        op = getattr(module, func_name, None)
        if callable(op):
            setattr(module, func_name, recording(op, spec, calls))

    def write():
        if calls:
            Path(out_dir, f"{name}-{os.getpid()}.json").write_text(json.dumps(calls))

    sys.meta_path.insert(0, _WrapOnImport(module_name, wrap))
    atexit.register(write)


# The seam probe, part 2 (in the checker).


def seam_env(feature: dict, check_py: str, seam_dir: str, spec: OpSpec) -> dict:
    """The environment of the verify.sh run under the seam probe (sitecustomize.py reads it)."""
    python_path = os.pathsep.join(filter(None, [str(SEAM_PROBE), os.environ.get("PYTHONPATH")]))
    env = {"PYTHONPATH": python_path, "FEATURE_SEAM_CHECK": check_py, "FEATURE_SEAM_OP": feature["op"],
           "FEATURE_SEAM_OUT": seam_dir}  # fmt: skip
    return {**env, "FEATURE_SEAM_AUX": feature["aux"]} if spec.aux is not None else env


def check_seam(
    out_dir: Path,
    spec: OpSpec,
    target: str,
    profile: str,
    aux_target: str = "",
    name: str = "seam",
    judge: Callable[[list[dict], str], list[str]] | None = None,
) -> list[str]:
    """The recorded calls of the op (and of the aux function, when the task names one and the calls need it) held
    to the task's rules (`judge`, or the spec's)."""
    calls = [c for f in sorted(out_dir.glob(f"{name}-*.json")) for c in json.loads(f.read_text())]
    aux_problems = []
    if spec.aux is not None and (spec.aux_needed is None or spec.aux_needed(calls)):
        aux_problems = check_seam(out_dir, spec.aux, aux_target, profile, name="aux-seam")
    if not calls:
        return [
            f"seam: the model never called {target} during verify.sh with the feature on (the instruction asks the "
            "model to use it, by that name)"
        ] + aux_problems
    errors = [c for c in calls if "error" in c]
    if errors:
        return [f"seam: {target} raised or misbehaved on the model's own inputs (call {errors[0]['call']}): "
                f"{errors[0]['error']}"] + aux_problems  # fmt: skip
    tol = spec.tolerance[torch.float32]
    worst = max((c for c in calls if "replay_error" in c), key=lambda c: c["replay_error"])
    problems = []
    if not worst["replay_error"] <= tol:
        problems.append(
            f"seam: on the model's own inputs of call {worst['call']}, the op differs from the reference by "
            f"{worst['replay_error']:.2e} > {tol:.0e} (float32)"
        )
    return problems + [f"seam: {why}" for why in (judge or spec.judge_calls)(calls, profile)] + aux_problems


def run_script(
    workspace: Path, script: str, args: list[str], framework: str, timeout_s: float, env_extra: dict | None = None
) -> tuple[list[str], str]:
    """Run a provided script; return its per-step losses as printed in the log it wrote, or a reason it gave none."""
    artifacts = workspace / "artifacts"
    before = set(artifacts.glob(f"{Path(script).stem}-*.log")) if artifacts.is_dir() else set()
    try:
        env = {**os.environ, "PYTHON": os.environ.get("PYTHON", sys.executable), **(env_extra or {})}
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


def _gap(a: list[float], b: list[float]) -> float:
    return max(abs(x - y) for x, y in zip(a, b))


def falling(script: str, printed: list[str]) -> list[str]:
    """Part (b) for one run with the feature on: finite losses whose last quarter is below their first."""
    losses = [float(s) for s in printed]
    if not all(math.isfinite(x) for x in losses):
        return [f"training: {script} with the feature on has a non-finite loss: {losses}"]
    q = max(1, len(losses) // 4)
    if len(losses) < 2 or not sum(losses[-q:]) / q < sum(losses[:q]) / q:
        return [f"training: {script} with the feature on: losses do not fall ({losses[0]:.4f} -> {losses[-1]:.4f})"]
    return []


def check_training(
    workspace: Path,
    framework: str,
    feature: dict,
    timeout_s: float,
    on_printed: list[str],
    profile: str,
    off_env: dict | None = None,
) -> list[str]:
    """Parts (c) and (d), given the losses of verify.sh with the feature on (run under the seam probe); the base and
    off runs get `off_env` (the seam probe again, recording into a folder of their own)."""
    problems = falling("verify.sh", on_printed)
    printed, why = run_script(workspace, "train.sh", feature["enable"], framework, timeout_s)
    problems += [f"training: {why}"] if why else falling("train.sh", printed)
    runs = [run_script(workspace, "verify.sh", [], framework, timeout_s, off_env) for _ in range(BASE_RUNS)]
    runs.append(run_script(workspace, "verify.sh", feature["disable"], framework, timeout_s, off_env))
    problems += [f"liveness: {why}" for _, why in runs if why]
    if problems:
        return problems
    return liveness(on_printed, [printed for printed, _ in runs[:-1]], runs[-1][0], LATER_STEP_NOISE[profile])


def liveness(
    on_printed: list[str], bases_printed: list[list[str]], off_printed: list[str], later_noise: float
) -> list[str]:
    """The switch changes the model (on leaves the envelope from every base run: at step 1, or by 3x later) and off
    restores the base path (off within the envelope of the nearest base run at step 1 and within 3x of it later).
    Step 1's envelope is the base runs' spread there; the later steps' the largest gap between two base runs, never
    below `later_noise` of the loss (the machine's run-to-run noise). Both never below one printed unit."""
    resolution = max(ENVELOPE_FLOOR, printed_resolution(on_printed, off_printed, *bases_printed))
    on, off = [float(s) for s in on_printed], [float(s) for s in off_printed]
    bases = [[float(s) for s in b] for b in bases_printed]
    first = max(resolution, max(b[0] for b in bases) - min(b[0] for b in bases))
    pairs = [_gap(a[1:], b[1:]) for i, a in enumerate(bases) for b in bases[i + 1 :] if len(a) > 1]
    later = max(resolution, *pairs, later_noise * max(abs(x) for b in bases for x in b[1:] or [0.0]))
    on_first, off_first = min(abs(on[0] - b[0]) for b in bases), min(abs(off[0] - b[0]) for b in bases)
    on_later = min(_gap(on[1:], b[1:]) for b in bases) if len(on) > 1 else 0.0
    off_later = min(_gap(off[1:], b[1:]) for b in bases) if len(off) > 1 else 0.0
    problems = []
    if not (on_first > first or on_later > ENVELOPE_MULTIPLE * later):
        problems.append(
            f"liveness: with the feature on, the losses stay within the base envelope (step 1: gap {on_first:.2e}, "
            f"envelope {first:.2e}; later: gap {on_later:.2e}, envelope {later:.2e}): the switch changes nothing"
        )
    if not (off_first <= first and off_later <= ENVELOPE_MULTIPLE * later):
        problems.append(
            f"liveness: with the feature off, the losses leave the base envelope (step 1: gap {off_first:.2e}, "
            f"envelope {first:.2e}; later: gap {off_later:.2e}, envelope {later:.2e}): the base path changed"
        )
    return problems


def check_model(
    workspace: Path, framework: str, feature: dict, timeout_s: float, spec: OpSpec, check_py: str, profile: str
) -> list[str]:
    """Parts (b)-(d): verify.sh with the feature on under the seam probe, judged at once (a model that misuses the
    op is FAIL without the other five runs), then train.sh and the liveness runs."""
    with tempfile.TemporaryDirectory(prefix="feature-seam-") as seam_dir:
        env = seam_env(feature, check_py, seam_dir, spec)
        on_printed, why = run_script(workspace, "verify.sh", feature["enable"], framework, timeout_s, env)
        if why:
            return [f"training: {why}", "seam, train.sh and liveness: not checked, since verify.sh did not run"]
        problems = check_seam(Path(seam_dir), spec, feature["op"], profile, feature.get("aux", ""))
    if not problems and spec.branch_args is not None:
        problems = check_branch(workspace, framework, feature, timeout_s, spec, check_py, profile)
    if problems:
        return problems + ["train.sh and liveness: not checked, since the model misuses the op"]
    with tempfile.TemporaryDirectory(prefix="feature-off-seam-") as off_dir:
        off_env = seam_env(feature, check_py, off_dir, spec)
        problems = check_training(workspace, framework, feature, timeout_s, on_printed, profile, off_env)
        return problems + calls_while_off(Path(off_dir), feature)


def check_branch(
    workspace: Path, framework: str, feature: dict, timeout_s: float, spec: OpSpec, check_py: str, profile: str
) -> list[str]:
    """The spec's branch run: verify.sh with the feature on and `branch_args`, under the seam probe."""
    args = spec.branch_args.get(framework)
    if args is None:
        return [f"branch: no branch run is defined for {framework}, so a rule its model may never reach is unchecked"]
    with tempfile.TemporaryDirectory(prefix="feature-branch-") as branch_dir:
        env = seam_env(feature, check_py, branch_dir, spec)
        _, why = run_script(workspace, "verify.sh", [*feature["enable"], *args], framework, timeout_s, env)
        if why:
            return [f"branch: {why}"]
        problems = check_seam(
            Path(branch_dir), spec, feature["op"], profile, feature.get("aux", ""), judge=spec.judge_branch
        )
    return [f"branch ({' '.join(args)}): {why.removeprefix('seam: ')}" for why in problems]


def calls_while_off(off_dir: Path, feature: dict) -> list[str]:
    """Revision 5: the base and "disable" runs must not call the op (or the aux function). On a profile where the
    feature's output equals the base path's (MoBA over a sequence of a few blocks is dense attention), the losses
    cannot show a switch that is on by default; the calls can."""
    problems = []
    for name, key in (("seam", "op"), ("aux-seam", "aux")):
        calls = sum(len(json.loads(f.read_text())) for f in off_dir.glob(f"{name}-*.json"))
        if calls:
            problems.append(
                f"liveness: with the feature off (verify.sh with no arguments and with {feature['disable']}), the "
                f"model called {feature[key]} {calls} times: the switch must be off by default, and off must not "
                "run the feature"
            )
    return problems


def main(spec: OpSpec, check_py: str) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--workspace", type=Path, required=True)
    p.add_argument("--framework", required=True, choices=list(LOSS_LINE))
    p.add_argument("--answer", type=Path)
    p.add_argument("--profile", required=True)
    p.add_argument("--timeout-s", type=float, default=1200.0, help="per provided-script run")
    a = p.parse_args()
    feature, problems = load_feature_json(a.workspace, spec.aux is not None)
    for key, key_spec in (("op", spec), ("aux", spec.aux)) if not problems else ():
        if key_spec is not None:
            op, why = import_op(a.workspace, feature[key])
            problems += [f"{key}: {w.removeprefix('op: ')}" for w in why]
            if op is not None:
                problems += check_op(op, key_spec, label=key)
    if problems:  # training takes minutes; a verdict already FAIL does not wait for it
        problems.append("training, seam and liveness: not checked, since the op check failed")
    else:
        problems = check_model(a.workspace, a.framework, feature, a.timeout_s, spec, check_py, a.profile)
    for line in problems:
        print(f"FAIL: {line}")
    if not problems:
        print("PASS")
    return 1 if problems else 0
