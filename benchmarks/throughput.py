"""Training throughput: pithtrain against TorchTitan and megatron-core, side by side, on the same shapes in one call.

    python3 benchmarks/throughput.py --config qwen3-30b-a3b-4l \
        [--frameworks pithtrain-compiled,torchtitan-compiled,megatron-core] [--balanced-routing] [--gpus 1,2] \
        [--steps 3,8] [--repeats 1] [--out results/throughput]
    python3 benchmarks/throughput.py --smoke --out /tmp/x      # CPU, tiny model, pithtrain only

Method (benchmarks/NOTES.md says why): every framework trains the configuration's model shape on the same
sequence length, global batch, warm-up and timed steps (at least 10 and 20 on a GPU), BF16 compute with fp32
master weights and AdamW, no activation checkpointing, through its own trainer. The same input pipeline on
every side: uniformly random token ids generated in memory before the first step (benchmarks/synthetic.py;
records say input_pipeline = "synthetic-in-memory"). The same timing window on every side: the wall time of a
whole optimizer step, from the end of one step to the end of the next, each end taken after the loss has been
reduced over the ranks and read back to the host. The same memory yardsticks on every side:
torch.cuda.max_memory_allocated (rank 0) and nvidia-smi's memory.used. Each run is its own process tree
(torchrun for more than one GPU), so memory and compile caches never leak from one run into the next; within
each block of runs (a mesh, a routing, a repeat) the frameworks run in a seeded random order (the seed is in
every record). The call first measures the bf16 matmul peak of its GPUs (8192^3, median of repeats), so MFU is
given against the 989 TFLOP/s spec and against what this machine delivers today. tokens/s per GPU is the
median over the timed steps.

pithtrain runs its own trainer through benchmarks/pithtrain_run.py (`python -m pithtrain train` with the
samples made before training) and is read from its metrics.jsonl; TorchTitan its own `Trainer` through
benchmarks/torchtitan_run.py (its Qwen3 MoE or DeepSeek-V3 model at the same shape, a flavor registered by
`--experimental.custom_import`; no tokenizer, no dataset files); megatron-core ("megatron-core + torch kernels")
through benchmarks/megatron_core_run.py (Qwen3-MoE shapes only; skipped, with the reason, where megatron-core is
not importable). Each side's driver writes one JSONL line per step. Each run is stopped once its last timed step
is logged (pithtrain would otherwise write a full checkpoint at max_steps). One JSONL record per run goes to
<out>/<call id>.jsonl.
"""

import argparse
import datetime
import json
import os
import platform
import random
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))
from synthetic import INPUT_PIPELINE  # noqa: E402

CONFIGS = REPO / "benchmarks" / "configs.toml"
# v2: every side fed in memory and timed over the whole step the same way (v1 records are not comparable).
SCHEMA = "pithtrain-throughput-v2"
MIN_STEPS = (10, 20)  # warm-up (compile settles) and timed steps of a GPU run
SPEC_PEAK_TFLOPS = 989.0  # H100/H200 SXM dense BF16, the datasheet figure
# megatron-core: megatron-core 0.19.2 with PyTorch kernels swapped in (benchmarks/megatron_core_run.py).
FRAMEWORKS = (
    "pithtrain", "pithtrain-compiled", "pithtrain-fp8", "torchtitan-eager", "torchtitan-compiled", "megatron-core"
)  # fmt: skip
MEGATRON_MODEL_FIELDS = (
    "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
    "num_experts", "num_experts_per_tok", "moe_intermediate_size", "tie_word_embeddings", "rms_norm_eps",
    "rope_theta", "norm_topk_prob", "aux_loss_coef",
)  # fmt: skip
SEED = 1234
TT_FLAVOR = "pithbench"


# ---- configurations ----


def load_config(name: str) -> dict:
    table = tomllib.loads(CONFIGS.read_text())
    if name not in table:
        raise SystemExit(f"--config {name!r} is not in {CONFIGS}; known: {', '.join(table)}")
    cfg = dict(table[name], name=name)
    missing = {"where", "seq_len", "micro_batch_size", "meshes", "model"} - set(cfg)
    if missing or ("sequences_per_gpu" in cfg) == ("global_batch_size" in cfg):
        raise SystemExit(
            f"config {name!r}: needs {sorted(missing)} and exactly one of sequences_per_gpu/global_batch_size"
        )
    return cfg


def mesh_of(m: dict) -> dict:
    """A mesh with every axis filled in; DP is what remains of the GPUs."""
    pp, cp, ep = m.get("pp", 1), m.get("cp", 1), m.get("ep", 1)
    if m["gpus"] % (pp * cp * ep):
        raise SystemExit(f"mesh {m}: gpus is not a multiple of pp x cp x ep")
    return {
        "gpus": m["gpus"],
        "nodes": m.get("nodes", 1),
        "pp": pp,
        "dp": m["gpus"] // (pp * cp * ep),
        "cp": cp,
        "ep": ep,
    }


def global_batch(cfg: dict, gpus: int) -> int:
    return cfg.get("global_batch_size") or cfg["sequences_per_gpu"] * gpus


def flops_per_token(cfg: dict) -> float:
    """pithtrain's documented formula (`flops_per_token` in the family's model file), for every framework."""
    from pithtrain.config import load_dataclass
    from pithtrain.models import model_family

    family = model_family(cfg["model"]["family"])
    return family.flops_per_token(load_dataclass(family.cfg_class, dict(cfg["model"]), prefix="model."), cfg["seq_len"])


# ---- the machine: peak, memory, versions ----


def measure_peak(gpus: int) -> dict:
    """Child-process entry (`--measure-peak N`): bf16 8192^3 matmul on each GPU, median TFLOP/s of 30."""
    import torch

    n, per_gpu = 8192, []
    for d in range(gpus):
        with torch.cuda.device(d):  # events record on the current device's stream: it must be the matmul's
            a, b = (torch.randn(n, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
            for _ in range(5):
                a @ b
            times = []
            for _ in range(30):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                a @ b
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end) / 1e3)
            per_gpu.append(2 * n**3 / statistics.median(times) / 1e12)
            del a, b
    return {"gpu_name": torch.cuda.get_device_name(0), "per_gpu_tflops": per_gpu, "tflops": statistics.mean(per_gpu)}


class GpuMemorySampler:
    """Peak `memory.used` of any GPU, sampled by nvidia-smi every 200 ms: the same yardstick for every
    framework (each reports its own allocator figure differently)."""

    def __init__(self):
        self.peak_mib, self.proc = 0.0, None
        if shutil.which("nvidia-smi"):
            cmd = ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-lms", "200"]
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                self.peak_mib = max(self.peak_mib, float(line.strip()))
            except ValueError:
                pass

    def stop(self) -> float | None:
        if self.proc is None:
            return None
        self.proc.terminate()
        self.proc.wait()
        return round(self.peak_mib / 1024, 2) if self.peak_mib else None


def git_state() -> tuple[str, bool | None]:
    """(commit, dirty). Where the tree travelled without .git, PITH_GIT_COMMIT and PITH_GIT_DIRTY (0/1) say what
    it was made from (gpu_run.sh sets them from the archive it carries); otherwise dirty is unknown (None)."""

    def git(*args):
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True)

    head = git("rev-parse", "HEAD")
    if head.returncode != 0:
        dirty = {"0": False, "1": True}.get(os.environ.get("PITH_GIT_DIRTY", ""))
        return os.environ.get("PITH_GIT_COMMIT", "unknown"), dirty
    return head.stdout.strip(), bool(git("status", "--porcelain", "--untracked-files=no").stdout.strip())


def version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def pithtrain_version() -> str:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]


# ---- launching and stopping one run ----


def launcher(mesh: dict, run_id: str) -> list[str]:
    """The process launcher for a mesh: plain python for one GPU, torchrun on one host, srun + torchrun
    on several nodes (inside a SLURM allocation; the run directory must be on a shared filesystem)."""
    py = [sys.executable]
    if mesh["nodes"] == 1:
        if mesh["gpus"] == 1:
            return py
        return [*py, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={mesh['gpus']}"]
    if "SLURM_JOB_ID" not in os.environ or int(os.environ.get("SLURM_NNODES", "0")) < mesh["nodes"]:
        raise RuntimeError(f"this mesh needs {mesh['nodes']} nodes: run the script inside a SLURM allocation of them")
    hosts = subprocess.run(
        ["scontrol", "show", "hostnames", os.environ["SLURM_JOB_NODELIST"]], capture_output=True, text=True
    ).stdout.split()
    per_node = mesh["gpus"] // mesh["nodes"]
    return [
        "srun", f"--nodes={mesh['nodes']}", "--ntasks-per-node=1", "--kill-on-bad-exit=1",
        *py, "-m", "torch.distributed.run", f"--nnodes={mesh['nodes']}", f"--nproc-per-node={per_node}",
        "--rdzv-backend=c10d", f"--rdzv-endpoint={hosts[0]}:29517", f"--rdzv-id={run_id}",
    ]  # fmt: skip


def stop_group(proc: subprocess.Popen) -> None:
    """End the run's own process group (it was started in a new session), politely first."""
    if proc.poll() is not None:
        return
    for sig, wait_s in ((signal.SIGTERM, 30), (signal.SIGKILL, 30)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def step_records(metrics: Path) -> list[dict]:
    """The complete lines of a per-step metrics JSONL that a run is still writing."""
    if not metrics.is_file():
        return []
    return [json.loads(line) for line in metrics.read_text().splitlines() if line.endswith("}")]


MEM_KIND = "torch.cuda.max_memory_allocated"


def read_steps(status: str, error: str, metrics: Path, steps, mem_field: str, mem_kind: str) -> dict:
    """A run's result from its driver's per-step JSONL (step, step_time_s, loss, and the peak memory allocated so
    far under `mem_field`): the timed steps' times, every step's loss, the peak over the run."""
    out = {"status": status, "error": error}
    if status == "ok":
        records = step_records(metrics)[: steps[0] + steps[1]]
        out |= {
            "step_times_s": [r["step_time_s"] for r in records[steps[0] :]],
            "losses": [r["loss"] for r in records],
            "peak_mem_gib": max(r[mem_field] for r in records),
            "peak_mem_kind": mem_kind,
        }
    return out


def run_until(cmd, env, cwd, log_path: Path, steps_seen, total_steps: int, timeout_s: float) -> tuple[str, str]:
    """Start `cmd`, stop it once `steps_seen()` reaches total_steps. Returns (status, detail)."""
    t0 = time.monotonic()
    with open(log_path, "w") as log:
        log.write("$ " + " ".join(cmd) + "\n")
        log.flush()
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            while True:
                done = steps_seen() >= total_steps
                if done or proc.poll() is not None:
                    break
                if time.monotonic() - t0 > timeout_s:
                    stop_group(proc)
                    return "timeout", f"stopped after {timeout_s:.0f} s with {steps_seen()} of {total_steps} steps"
                time.sleep(0.2)
        finally:
            stop_group(proc)
    if done or steps_seen() >= total_steps:
        return "ok", ""
    lines = log_path.read_text(errors="replace").strip().splitlines()
    # An out-of-memory error is the cause whatever follows it; otherwise the log's last lines say what happened.
    oom = [line.strip() for line in lines[1:] if "OutOfMemoryError" in line][:1]  # lines[0] is the command
    return "failed", f"exit code {proc.returncode} after {steps_seen()} of {total_steps} steps: " + " | ".join(
        oom or lines[-15:]
    )


# ---- pithtrain ----


def pithtrain_toml(cfg, mesh, routing, variant: str, run_dir: Path, total: int, smoke: bool) -> str:
    """The pithtrain config of one run (also used by benchmarks/profile_step.py). variant: "eager", "compiled",
    or "fp8" (compiled, with training.precision = "fp8")."""
    model = dict(cfg["model"]) | ({"force_balanced_routing": True} if routing == "balanced" else {})
    toml = [f'run_dir = "{run_dir}"', "[model]", *(f"{k} = {json.dumps(v)}" for k, v in model.items())]
    toml += [
        "[training]",
        f"max_steps = {total + 1000}",  # never reached: the run is stopped after `total` steps (no final save)
        f"global_batch_size = {global_batch(cfg, mesh['gpus'])}",
        f"micro_batch_size = {cfg['micro_batch_size']}",
        "warmup_steps = 1",
        f"seed = {SEED}",
        f'device = "{"cpu" if smoke else "cuda"}"',
        f'precision = "{"fp32" if smoke else "fp8" if variant == "fp8" else "bf16"}"',
        *(["compile = true"] if variant != "eager" else []),
        "[data]",
        'kind = "synthetic"',
        f"seq_len = {cfg['seq_len']}",
        "[checkpoint]",
        'resume = "never"',
        "[logging]",
        "log_interval = 1",
        "[distributed]",
        f"pipeline_parallel_size = {mesh['pp']}",
        f"context_parallel_size = {mesh['cp']}",
        f"expert_parallel_size = {mesh['ep']}",
    ]
    return "\n".join(toml) + "\n"


def pithtrain_run(cfg, mesh, routing, steps, variant: str, work: Path, log_path: Path, timeout_s, smoke) -> dict:
    warm, timed = steps
    total = warm + timed
    run_dir = work / "run"
    (work / "pithtrain.toml").write_text(pithtrain_toml(cfg, mesh, routing, variant, run_dir, total, smoke))
    metrics = run_dir / "metrics.jsonl"

    script = REPO / "benchmarks" / "pithtrain_run.py"
    cmd = [*launcher(mesh, work.name), str(script), str(work / "pithtrain.toml"), "--steps", str(total)]
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    status, error = run_until(cmd, env, REPO, log_path, lambda: len(step_records(metrics)), total, timeout_s)
    return read_steps(status, error, metrics, steps, "peak_mem_gib", "process peak RSS" if smoke else MEM_KIND)


# ---- TorchTitan ----


def torchtitan_flavor_module(cfg, work: Path) -> str:
    """Writes `pithbench_flavor.py` into `work`: imported through `--experimental.custom_import`, it registers
    TorchTitan's own model for the configuration's family at the benchmark's shape as flavor `pithbench`.
    Returns TorchTitan's model name (the job's `model.name`); NotImplementedError where TorchTitan's model
    cannot do what pithtrain's does (the run is then recorded as skipped, with the reason)."""
    family = cfg["model"]["family"]
    if family == "qwen3_moe":
        name, text = "qwen3", torchtitan_qwen3_flavor(cfg)
    elif family == "deepseek_v2":
        name, text = "deepseek_v3", torchtitan_deepseek_flavor(cfg)
    else:
        raise NotImplementedError(f"the TorchTitan side maps families qwen3_moe and deepseek_v2, not {family}")
    (work / "pithbench_flavor.py").write_text(text)
    return name


def torchtitan_qwen3_flavor(cfg) -> str:
    """TorchTitan's Qwen3 MoE args at the benchmark's shape."""
    m = cfg["model"]
    return f'''"""Registers TorchTitan Qwen3 flavor {TT_FLAVOR!r}, written by benchmarks/throughput.py."""
from torchtitan.models.moe import MoEArgs
from torchtitan.models.qwen3 import qwen3_args
from torchtitan.models.qwen3.model.args import Qwen3ModelArgs

qwen3_args[{TT_FLAVOR!r}] = Qwen3ModelArgs(
    vocab_size={m["vocab_size"]}, max_seq_len={cfg["seq_len"]}, head_dim={m["head_dim"]}, dim={m["hidden_size"]},
    n_layers={m["num_hidden_layers"]}, n_heads={m["num_attention_heads"]}, n_kv_heads={m["num_key_value_heads"]},
    qk_norm=True, hidden_dim={m["moe_intermediate_size"] * m["num_experts_per_tok"]}, rope_theta=1000000,
    enable_weight_tying={m.get("tie_word_embeddings", False)}, moe_enabled=True,
    moe_inter_dim={m["moe_intermediate_size"]},
    moe_args=MoEArgs(num_experts={m["num_experts"]}, num_shared_experts=0, top_k={m["num_experts_per_tok"]},
                     score_func="softmax", route_norm=True, route_scale=1.0, score_before_experts=False),
)
'''


def torchtitan_deepseek_flavor(cfg) -> str:
    """DeepSeek-V2 on TorchTitan's DeepSeek-V3 model (MLA, the first layers dense, shared experts beside the routed
    ones), with pithtrain's routing: softmax/sigmoid scores over all experts, top-k, renormalised only if
    norm_topk_prob, times routed_scaling_factor, weights applied after the experts; plain RoPE; no expert bias
    (TorchTitan's aux-loss-free balancing, which DeepSeek-V2 does not have)."""
    from pithtrain.config import load_dataclass
    from pithtrain.models import model_family

    m = load_dataclass(model_family("deepseek_v2").cfg_class, dict(cfg["model"]), prefix="model.")
    if m.rope_factor != 1.0:
        raise NotImplementedError(
            f"model.rope_factor = {m.rope_factor}: pithtrain applies YaRN at every length, TorchTitan's DeepSeek-V3 "
            "only beyond original_seq_len; the TorchTitan side needs rope_factor = 1.0 (plain RoPE)"
        )
    if m.topk_method != "greedy":
        raise NotImplementedError(
            f"model.topk_method = {m.topk_method!r}: pithtrain scores an expert group by its best expert, "
            "TorchTitan by its best two; the TorchTitan side needs topk_method = 'greedy'"
        )
    if m.tie_word_embeddings:
        raise NotImplementedError("model.tie_word_embeddings = true: TorchTitan's DeepSeek-V3 has no weight tying")
    seq = cfg["seq_len"]
    return f'''"""Registers TorchTitan DeepSeek-V3 flavor {TT_FLAVOR!r} (DeepSeek-V2), by benchmarks/throughput.py."""
from torchtitan.models.deepseek_v3 import deepseekv3_args
from torchtitan.models.deepseek_v3.model.args import DeepSeekV3ModelArgs
from torchtitan.models.moe import MoEArgs

# original_seq_len = max_seq_len: TorchTitan applies YaRN (and its softmax-scale correction) only beyond it.
deepseekv3_args[{TT_FLAVOR!r}] = DeepSeekV3ModelArgs(
    vocab_size={m.vocab_size}, max_seq_len={seq}, dim={m.hidden_size}, inter_dim={m.intermediate_size},
    moe_inter_dim={m.moe_intermediate_size}, n_layers={m.num_hidden_layers}, n_dense_layers={m.first_k_dense_replace},
    n_heads={m.num_attention_heads}, norm_eps={m.rms_norm_eps!r}, q_lora_rank={m.q_lora_rank},
    kv_lora_rank={m.kv_lora_rank}, qk_nope_head_dim={m.qk_nope_head_dim}, qk_rope_head_dim={m.qk_rope_head_dim},
    v_head_dim={m.v_head_dim}, attn_type="sdpa", attn_mask_type="causal",
    original_seq_len={seq}, rope_theta={m.rope_theta!r}, rope_factor=1.0,
    moe_args=MoEArgs(num_experts={m.n_routed_experts}, num_shared_experts={m.n_shared_experts},
                     top_k={m.num_experts_per_tok}, score_func={m.scoring_func!r}, route_norm={m.norm_topk_prob},
                     route_scale={m.routed_scaling_factor!r}, score_before_experts=False, load_balance_coeff=None),
)
'''


def torchtitan_run(cfg, mesh, routing, steps, compiled: bool, work: Path, log_path: Path, timeout_s) -> dict:
    warm, timed = steps
    total = warm + timed
    if mesh["pp"] > 1 or mesh["cp"] > 1 or mesh["nodes"] > 1:
        return {"status": "skipped", "error": "the TorchTitan side covers one host without PP/CP so far"}
    if cfg["micro_batch_size"] * mesh["gpus"] != global_batch(cfg, mesh["gpus"]):
        return {"status": "skipped", "error": "the TorchTitan side runs without gradient accumulation so far"}
    if version("torchtitan") is None:
        return {"status": "failed", "error": "torchtitan is not importable (gpu_run.sh installs it from .whl/)"}
    try:
        tt_model = torchtitan_flavor_module(cfg, work)
    except NotImplementedError as e:
        return {"status": "skipped", "error": str(e)}
    job = torchtitan_job(cfg, mesh, routing, total, compiled, tt_model, work)
    (work / "torchtitan.toml").write_text(to_toml(job))
    metrics = work / "metrics.jsonl"

    # TorchTitan reads LOCAL_RANK, so it goes through torchrun even on one GPU; --role/--tee label each line's rank.
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={mesh['gpus']}"]
    torchrun += ["--role", "rank", "--tee", "3"]
    script = REPO / "benchmarks" / "torchtitan_run.py"
    cmd = [*torchrun, str(script), "--base-model", tt_model, "--metrics", str(metrics)]
    cmd += ["--job.config_file", str(work / "torchtitan.toml")]
    path = os.pathsep.join(filter(None, [str(work), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": path, "HF_HUB_OFFLINE": "1"}
    status, error = run_until(cmd, env, work, log_path, lambda: len(step_records(metrics)), total, timeout_s)
    return read_steps(status, error, metrics, steps, "max_mem_gib", MEM_KIND)


def torchtitan_job(cfg, mesh, routing, total: int, compiled: bool, tt_model: str, work: Path) -> dict:
    """TorchTitan's job config: its own trainer and model, at the flavor registered by the custom import
    (benchmarks/torchtitan_run.py swaps in its in-memory loader, no tokenizer)."""
    return {
        "job": {"dump_folder": str(work / "tt-out"), "description": f"pithtrain benchmark {cfg['name']}"},
        "metrics": {"log_freq": 1, "disable_color_printing": True, "enable_tensorboard": False},
        "model": {"name": tt_model, "flavor": TT_FLAVOR},
        "optimizer": {"name": "AdamW", "lr": 3e-4, "eps": 1e-8, "weight_decay": 0.1, "implementation": "fused"},
        "lr_scheduler": {"warmup_steps": 1},
        "training": {
            "local_batch_size": global_batch(cfg, mesh["gpus"]) // mesh["gpus"],
            "seq_len": cfg["seq_len"],
            "steps": total,
            "max_norm": 1.0,
            "dtype": "float32",  # fp32 master weights; bf16 compute through autocast (1 GPU) or FSDP
            "mixed_precision_param": "bfloat16",
        },
        "parallelism": {"data_parallel_shard_degree": -1, "expert_parallel_degree": mesh["ep"]},
        "activation_checkpoint": {"mode": "none"},
        "compile": {"enable": compiled, "components": ["model", "loss"]},
        "checkpoint": {"enable": False},
        "debug": {"seed": SEED, "moe_force_load_balance": routing == "balanced"},
        "experimental": {"custom_import": "pithbench_flavor"},
    }


# ---- megatron-core + torch kernels ----


def megatron_spec(cfg, mesh, routing, steps) -> dict:
    """The run spec benchmarks/megatron_core_run.py reads: the model with pithtrain's Qwen3-MoE field names."""
    model = {k: v for k, v in cfg["model"].items() if k in MEGATRON_MODEL_FIELDS}
    return model | {
        "seq_len": cfg["seq_len"],
        "sequences_per_gpu": global_batch(cfg, mesh["gpus"]) // mesh["gpus"],
        "ep": mesh["ep"],
        "warmup_steps": steps[0],
        "timed_steps": steps[1],
        "balanced_routing": routing == "balanced",
        "seed": SEED,
    }


def megatron_run(cfg, mesh, routing, steps, work: Path, log_path: Path, timeout_s) -> dict:
    total = steps[0] + steps[1]
    if cfg["model"]["family"] != "qwen3_moe":
        return {"status": "skipped", "error": "the megatron-core side maps qwen3_moe only so far"}
    if mesh["pp"] > 1 or mesh["cp"] > 1 or mesh["nodes"] > 1 or mesh["ep"] not in (1, mesh["gpus"]):
        return {"status": "skipped", "error": "the megatron-core side covers one host, EP = 1 or all GPUs, so far"}
    if cfg["micro_batch_size"] * mesh["gpus"] != global_batch(cfg, mesh["gpus"]):
        return {"status": "skipped", "error": "the megatron-core side runs without gradient accumulation so far"}
    if version("megatron-core") is None:
        return {"status": "skipped", "error": "megatron-core is not importable: pip install megatron-core==0.19.2 "
                "(Python >= 3.12; gpu_run.sh installs it from .whl/)"}  # fmt: skip
    (work / "spec.json").write_text(json.dumps(megatron_spec(cfg, mesh, routing, steps)))
    metrics = work / "metrics.jsonl"

    script = REPO / "benchmarks" / "megatron_core_run.py"
    cmd = [*launcher(mesh, work.name), str(script), "--spec", str(work / "spec.json"), "--metrics", str(metrics)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    status, error = run_until(cmd, env, work, log_path, lambda: len(step_records(metrics)), total, timeout_s)
    return read_steps(status, error, metrics, steps, "max_mem_gib", MEM_KIND)


def to_toml(table: dict) -> str:
    lines = []
    for section, values in table.items():
        lines.append(f"[{section}]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in values.items()]
    return "\n".join(lines) + "\n"


# ---- one call ----


def framework_info(name: str) -> dict:
    if name.startswith("pithtrain"):
        variant = "eager" if name == "pithtrain" else name.split("-")[1]
        return {"framework": "pithtrain", "framework_version": pithtrain_version(), "variant": variant}
    if name == "megatron-core":
        return {"framework": "megatron-core + torch kernels", "framework_version": version("megatron-core"),
                "variant": "eager"}  # fmt: skip
    return {"framework": "torchtitan", "framework_version": version("torchtitan"), "variant": name.split("-")[1]}


def one_run(cfg, framework, mesh, routing, steps, work_root: Path, logs: Path, index: int, timeout_s, smoke):
    tag = f"{index:02d}-{framework}-{mesh_label(mesh, smoke)}-{routing}"
    work = work_root / tag
    work.mkdir(parents=True)
    log_path = logs / f"{tag}.log"
    print(f"[{time.strftime('%H:%M:%S')}] run {tag}", flush=True)
    sampler = GpuMemorySampler() if not smoke else None
    t0 = time.monotonic()
    try:
        if framework.startswith("pithtrain"):
            variant = framework_info(framework)["variant"]
            result = pithtrain_run(cfg, mesh, routing, steps, variant, work, log_path, timeout_s, smoke)
        elif framework in ("torchtitan-eager", "torchtitan-compiled"):
            compiled = framework == "torchtitan-compiled"
            result = torchtitan_run(cfg, mesh, routing, steps, compiled, work, log_path, timeout_s)
        elif framework == "megatron-core":
            result = megatron_run(cfg, mesh, routing, steps, work, log_path, timeout_s)
        else:
            raise AssertionError(framework)
    except RuntimeError as e:
        result = {"status": "failed", "error": str(e)}
    finally:
        smi_peak = sampler.stop() if sampler else None
    result |= {"wall_s": round(time.monotonic() - t0, 1), "peak_mem_nvidia_smi_gib": smi_peak, "log": log_path.name}
    return tag, result


def make_record(cfg, framework, mesh, routing, steps, result, peak, call, fpt) -> dict:
    gb = global_batch(cfg, mesh["gpus"])
    tokens_per_gpu = gb * cfg["seq_len"] / mesh["gpus"]
    # The peak of the GPUs this run used (on a multi-node mesh, those of this node stand for all).
    per_gpu = peak.get("per_gpu_tflops") or []
    peak_tflops = statistics.mean(per_gpu[: mesh["gpus"] // mesh["nodes"]]) if per_gpu else None
    rec = {
        "schema": SCHEMA,
        "smoke": call["smoke"],
        "call_id": call["id"],
        "command": call["command"],
        "run_index": call["index"],
        "run_order_seed": call["order_seed"],
        "input_pipeline": INPUT_PIPELINE,
        "step_time_window": "wall time between the ends of two steps, each after the loss reduction's host read",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        **framework_info(framework),
        "label": framework,
        "config": cfg["name"],
        "config_table": {k: v for k, v in cfg.items() if k != "name"},
        "routing": routing,
        "gpus": mesh["gpus"],
        "mesh": mesh,
        "device_name": peak.get("gpu_name") or platform.processor() or platform.machine(),
        "seq_len": cfg["seq_len"],
        "global_batch_size": gb,
        "micro_batch_size": cfg["micro_batch_size"],
        "warmup_steps": steps[0],
        "timed_steps": steps[1],
        "flops_per_token": fpt,
        "peak_spec_tflops": None if call["smoke"] else SPEC_PEAK_TFLOPS,
        "peak_measured_tflops": peak_tflops,
        "peak_measured_per_gpu_tflops": peak.get("per_gpu_tflops"),
        "git_commit": call["git_commit"],
        "git_dirty": call["git_dirty"],
        "torch_version": call["torch_version"],
        "python_version": platform.python_version(),
        "status": result["status"],
        "error": result.get("error", ""),
        "wall_s": result["wall_s"],
        "log": result["log"],
        "tokens_per_s_per_gpu": None,
        "mfu_spec": None,
        "mfu_measured_peak": None,
        "peak_mem_gib": result.get("peak_mem_gib"),
        "peak_mem_kind": result.get("peak_mem_kind"),
        "peak_mem_nvidia_smi_gib": result["peak_mem_nvidia_smi_gib"] if result["status"] != "skipped" else None,
        "step_times_s": result.get("step_times_s"),
        "losses": result.get("losses"),
    }
    if result["status"] == "ok" and result["step_times_s"]:
        tps = statistics.median(tokens_per_gpu / t for t in result["step_times_s"])
        rec["tokens_per_s_per_gpu"] = round(tps, 1)
        if not call["smoke"]:
            rec["mfu_spec"] = round(tps * fpt / (SPEC_PEAK_TFLOPS * 1e12), 4)
            if peak_tflops:
                rec["mfu_measured_peak"] = round(tps * fpt / (peak_tflops * 1e12), 4)
    return rec


def mesh_label(mesh: dict, cpu: bool = False) -> str:
    """`PP2xEP2`, `1GPU`; a smoke run on CPU is `CPU` (one process, no GPU)."""
    if cpu:
        return "CPU"
    return "x".join(f"{k.upper()}{mesh[k]}" for k in ("pp", "dp", "cp", "ep") if mesh[k] > 1) or "1GPU"


def summary(records: list[dict]) -> str:
    def f(v, fmt):
        return format(v, fmt) if v is not None else "-"

    lines = [
        f"{'framework':20} {'gpus':>4} {'mesh':6} {'routing':8} {'tok/s/GPU':>10} {'MFU989':>7} {'MFUmeas':>7} "
        f"{'mem GiB':>7} {'smi GiB':>7}  status"
    ]
    for r in records:
        lines.append(
            f"{r['label']:20} {r['gpus']:>4} {mesh_label(r['mesh'], r['smoke']):6} {r['routing']:8} "
            f"{f(r['tokens_per_s_per_gpu'], ',.0f'):>10} {f(r['mfu_spec'], '.1%'):>7} "
            f"{f(r['mfu_measured_peak'], '.1%'):>7} {f(r['peak_mem_gib'], '.1f'):>7} "
            f"{f(r['peak_mem_nvidia_smi_gib'], '.1f'):>7}  {r['status']} {r['error'][:80]}"
        )
    return "\n".join(lines + ratio_lines(records))


def ratio_lines(records: list[dict]) -> list[str]:
    """Per mesh and routing: pithtrain's best BF16 run over TorchTitan's best and megatron-core's, FP8 over BF16."""
    lines = []
    blocks = {(mesh_label(r["mesh"], r["smoke"]), r["routing"]) for r in records}
    for mesh, routing in sorted(blocks):
        block = [r for r in records if (mesh_label(r["mesh"], r["smoke"]), r["routing"]) == (mesh, routing)]

        def best(pred, block=block):
            return max(
                (r["tokens_per_s_per_gpu"] for r in block if pred(r) and r["tokens_per_s_per_gpu"]), default=None
            )

        bf16 = best(lambda r: r["framework"] == "pithtrain" and r["variant"] != "fp8")
        pairs = {
            "BF16/TorchTitan": (bf16, best(lambda r: r["framework"] == "torchtitan")),
            "BF16/megatron-core": (bf16, best(lambda r: r["framework"].startswith("megatron-core"))),
            "FP8/BF16": (best(lambda r: r["framework"] == "pithtrain" and r["variant"] == "fp8"), bf16),
        }
        parts = [f"{name} {a / b:.3f}" for name, (a, b) in pairs.items() if a and b]
        if parts:
            lines.append(
                f"ratios {mesh} {routing}: " + ", ".join(parts) + " (pithtrain BF16: its best of eager/compiled)"
            )
    return lines


def plan(meshes: list[dict], frameworks: list[str], routings: list[str], repeats: int, seed: int):
    """The order of runs: blocks of every framework once (a mesh, a repeat, a routing), each block in its own
    random order drawn from `seed`, so that no framework always runs first or right after another."""
    rng = random.Random(seed)
    for mesh in meshes:
        for _ in range(repeats):
            for routing in routings:
                for framework in rng.sample(frameworks, len(frameworks)):
                    yield mesh, framework, routing


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--config", help="a table of benchmarks/configs.toml")
    p.add_argument("--frameworks", default=",".join(FRAMEWORKS), help=f"comma list of {', '.join(FRAMEWORKS)}")
    p.add_argument("--balanced-routing", action="store_true", help="force round-robin routing in every framework")
    p.add_argument("--both-routings", action="store_true", help="run natural and balanced routing, alternating")
    p.add_argument("--gpus", help="comma list of GPU counts: the config's meshes with that many GPUs (default: all)")
    p.add_argument("--steps", help="W,T: warm-up and timed steps (default: the config's)")
    p.add_argument("--repeats", type=int, default=1, help="rounds over the frameworks, each in a fresh random order")
    p.add_argument("--order-seed", type=int, help="seed of the run order (default: from the clock; in every record)")
    p.add_argument("--out", default=str(REPO / "results" / "throughput"), help="directory for <call id>.jsonl")
    p.add_argument("--logs", help="directory for each run's log (default: <out>/logs-<call id>)")
    p.add_argument("--run-timeout", type=float, default=600, help="seconds before one run is stopped")
    p.add_argument("--deadline", type=float, help="seconds for the whole call: later runs are skipped, not started")
    p.add_argument("--smoke", action="store_true", help="CPU, config smoke-tiny, pithtrain only; records smoke = true")
    p.add_argument("--measure-peak", type=int, metavar="N", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.smoke:
        args.config, args.frameworks = args.config or "smoke-tiny", "pithtrain"
    if not args.config and args.measure_peak is None:
        p.error("--config is required (or --smoke)")
    return args


def select(args) -> tuple[dict, list[str], tuple[int, int], list[dict], list[str]]:
    """The configuration, frameworks, steps, meshes and routings the arguments ask for, checked."""
    cfg = load_config(args.config)
    frameworks = [f for f in args.frameworks.split(",") if f]
    unknown = set(frameworks) - set(FRAMEWORKS)
    if unknown:
        raise SystemExit(f"--frameworks: unknown {sorted(unknown)}; known: {', '.join(FRAMEWORKS)}")
    if (cfg["where"] == "cpu") != args.smoke:
        raise SystemExit(f"config {cfg['name']!r} is where = {cfg['where']!r}: --smoke goes with the CPU configs only")
    steps = tuple(int(s) for s in args.steps.split(",")) if args.steps else (cfg["warmup_steps"], cfg["timed_steps"])
    if len(steps) != 2 or steps[1] < 1:
        raise SystemExit(f"--steps {args.steps}: give W,T with T >= 1")
    if not args.smoke and (steps[0] < MIN_STEPS[0] or steps[1] < MIN_STEPS[1]):
        raise SystemExit(
            f"--steps / config {cfg['name']!r}: {steps[0]} warm-up and {steps[1]} timed steps; a GPU comparison needs "
            f"at least {MIN_STEPS[0]} and {MIN_STEPS[1]} (compile settles, the median steadies): give --steps 10,20"
        )
    meshes = [mesh_of(m) for m in cfg["meshes"]]
    if args.gpus:
        wanted = {int(g) for g in args.gpus.split(",")}
        meshes = [m for m in meshes if m["gpus"] in wanted]
        if not meshes:
            have = [m["gpus"] for m in cfg["meshes"]]
            raise SystemExit(f"--gpus {args.gpus}: config {cfg['name']!r} has meshes of {have} GPUs")
    routings = ["natural", "balanced"] if args.both_routings else ["balanced" if args.balanced_routing else "natural"]
    return cfg, frameworks, steps, meshes, routings


def preflight(smoke: bool, frameworks: list[str], gpus: int) -> str:
    """Why this Python cannot run the call (one line: what is missing and how to get it), or "" when it can.
    Checked before anything is written, so a call that cannot measure leaves no record behind."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return f"torch is not importable by {sys.executable}: run with the Python that holds torch (a CUDA build)"
    if smoke:
        return ""
    import torch

    if not torch.cuda.is_available():
        return (
            f"torch {torch.__version__} sees no CUDA GPU: the comparison needs {gpus} GPU(s) and a CUDA build of torch "
            "(on a CPU host, `python benchmarks/throughput.py --smoke` checks the pipeline)"
        )
    if torch.cuda.device_count() < gpus:
        return f"{torch.cuda.device_count()} GPU(s) visible, the meshes asked for need {gpus}: pass --gpus N"
    needs = {"torchtitan": ("torchtitan", "torchtitan==0.2.2"), "megatron-core": ("megatron", "megatron-core==0.19.2")}
    for prefix, (module, requirement) in needs.items():
        wanted = [f for f in frameworks if f.startswith(prefix)]
        if wanted and importlib.util.find_spec(module) is None:
            return (
                f"{', '.join(wanted)}: {module} is not importable; `pip install {requirement}` (benchmarks/gpu_run.sh "
                "carries the wheels), or leave it out with --frameworks"
            )
    return ""


# Where a call writes and how long it may take: not what it measures, and machine-specific (gpu_run.sh's folders).
PLACE_OPTIONS = ("--out", "--logs", "--run-timeout", "--deadline")


def user_command(argv: list[str]) -> str:
    """The command a user types for what this call measures: the options of PLACE_OPTIONS left out."""
    args, skip = [], False
    for a in argv:
        if skip or a.split("=")[0] in PLACE_OPTIONS:
            skip = not skip and "=" not in a and a in PLACE_OPTIONS
            continue
        args.append(a)
    return shlex.join(["python", "benchmarks/throughput.py", *args])


def measure_peak_in_child(gpus: int) -> dict:
    res = subprocess.run([sys.executable, __file__, "--measure-peak", str(gpus)], capture_output=True, text=True)
    if res.returncode != 0:
        print(f"peak measurement failed (MFU against it left empty): {res.stderr[-500:]}", flush=True)
        return {}
    peak = json.loads(res.stdout.strip().splitlines()[-1])
    per_gpu = ", ".join(f"{t:.0f}" for t in peak["per_gpu_tflops"])
    print(f"measured bf16 matmul peak: {per_gpu} TFLOP/s per GPU ({peak['gpu_name']})", flush=True)
    return peak


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.measure_peak is not None:
        print(json.dumps(measure_peak(args.measure_peak)))
        return 0
    started = time.monotonic()
    cfg, frameworks, steps, meshes, routings = select(args)
    missing = preflight(args.smoke, frameworks, max(m["gpus"] // m["nodes"] for m in meshes))
    if missing:
        print(f"throughput: {missing}", file=sys.stderr)
        return 2
    import torch

    commit, dirty = git_state()
    call_id = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ") + f"-{cfg['name']}"
    order_seed = args.order_seed if args.order_seed is not None else time.time_ns() % 2**31
    call = {"id": call_id, "smoke": args.smoke, "git_commit": commit, "git_dirty": dirty, "order_seed": order_seed}
    call["command"] = user_command(sys.argv[1:] if argv is None else argv)
    call["torch_version"] = torch.__version__
    out = Path(args.out)
    logs = Path(args.logs) if args.logs else out / f"logs-{call_id}"
    out.mkdir(parents=True, exist_ok=True)
    logs.mkdir(parents=True, exist_ok=True)
    peak = {} if args.smoke else measure_peak_in_child(max(m["gpus"] // m["nodes"] for m in meshes))
    fpt = flops_per_token(cfg)
    records = []
    with tempfile.TemporaryDirectory(prefix="pithbench-") as tmp:
        runs = plan(meshes, frameworks, routings, args.repeats, order_seed)
        for index, (mesh, framework, routing) in enumerate(runs, 1):
            call["index"] = index
            left = args.deadline - (time.monotonic() - started) if args.deadline else args.run_timeout
            if left < 60:
                tag = f"{index:02d}-{framework}-{mesh_label(mesh, args.smoke)}-{routing}"
                result = {"status": "skipped", "error": "call deadline reached", "wall_s": 0.0}
                result |= {"peak_mem_nvidia_smi_gib": None, "log": ""}
            else:
                timeout = min(args.run_timeout, left)
                tag, result = one_run(cfg, framework, mesh, routing, steps, Path(tmp), logs, index, timeout, args.smoke)
            rec = make_record(cfg, framework, mesh, routing, steps, result, peak, call, fpt)
            records.append(rec)
            with open(out / f"{call_id}.jsonl", "a") as f:
                f.write(json.dumps(rec) + "\n")
            tps = rec["tokens_per_s_per_gpu"]
            print(f"    {tag}: {rec['status']} {tps} tokens/s/GPU {rec['error'][:300]}", flush=True)
    print(f"\n{cfg['name']}: seq {cfg['seq_len']}, steps {steps[0]}+{steps[1]}; records: {out / call_id}.jsonl")
    print(summary(records))
    return 0 if all(r["status"] in ("ok", "skipped") for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
