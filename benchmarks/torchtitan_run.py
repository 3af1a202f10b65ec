"""Throughput side "torchtitan": one benchmark run of TorchTitan 0.2.2 through its own `Trainer`, fed in memory.

    torchrun --standalone --nproc-per-node N benchmarks/torchtitan_run.py --base-model qwen3 --metrics OUT.jsonl \
        --job.config_file JOB.toml

Everything is TorchTitan's own (`torchtitan.train.main`, `Trainer`, its model, parallelisation, optimizer, loss,
compile) except two things, so that it is timed and fed exactly as pithtrain and megatron-core are
(benchmarks/NOTES.md, Method):
- the data: TorchTitan's train spec for `--base-model` (the job's model.name) is registered again as
  `pithbench_<base>`, with no tokenizer and `InMemoryTokens` as its data loader: every step's uniformly random
  token ids, generated before the trainer starts (no dataset files, no tokenizing inside the step); the run's
  model.name is switched to it on the command line.
- the record: `TimedTrainer` writes one JSONL line per step on rank 0, taken where TorchTitan logs the step, i.e.
  after the loss has been reduced over the ranks and read back to the host: `step_time_s` is the wall time since
  the previous step's line (the whole optimizer step, loss reduction included), `max_mem_gib` the largest
  `torch.cuda.max_memory_allocated` so far (read before TorchTitan resets the counter at each log line).
"""

import argparse
import dataclasses
import json
import sys
import time

import torch
from synthetic import token_rows

SPEC_PREFIX = "pithbench_"


def register_in_memory_spec(base: str) -> str:
    """Registers TorchTitan's train spec `base` again, without a tokenizer and with `InMemoryTokens`; returns its
    name, `pithbench_<base>`."""
    from torchtitan.components.dataloader import BaseDataLoader
    from torchtitan.protocols.train_spec import get_train_spec, register_train_spec

    class InMemoryTokens(BaseDataLoader):
        """Yields ({"input": ids}, labels) for each step from tensors built before training."""

        def __init__(self, dp_world_size, dp_rank, tokenizer, job_config):
            t = job_config.training
            vocab = spec.model_args[job_config.model.flavor].vocab_size
            rows = token_rows(vocab, t.steps * t.local_batch_size, t.seq_len, job_config.debug.seed * 1000 + dp_rank)
            rows = rows.view(t.steps, t.local_batch_size, t.seq_len + 1)
            self.inputs, self.labels = rows[..., :-1].contiguous(), rows[..., 1:].contiguous()

        def __iter__(self):
            for inputs, labels in zip(self.inputs, self.labels):
                yield {"input": inputs}, labels

        def state_dict(self):
            return {}

        def load_state_dict(self, state_dict):
            pass

    spec = dataclasses.replace(get_train_spec(base), build_tokenizer_fn=None, build_dataloader_fn=InMemoryTokens)
    register_train_spec(SPEC_PREFIX + base, spec)
    return SPEC_PREFIX + base


class StepRecorder:
    """One JSONL line per step: wall time since the previous line, loss, peak allocated memory so far."""

    def __init__(self, path: str | None, device: torch.device):
        self.file = open(path, "w") if path else None
        self.device, self.last, self.peak_gib = device, time.perf_counter(), 0.0

    def record(self, step: int, loss: float) -> None:
        now = time.perf_counter()
        if self.device.type == "cuda":
            self.peak_gib = max(self.peak_gib, torch.cuda.max_memory_allocated(self.device) / 2**30)
        if self.file:
            line = {"step": step, "step_time_s": now - self.last, "loss": float(loss), "max_mem_gib": self.peak_gib}
            self.file.write(json.dumps(line) + "\n")
            self.file.flush()
        self.last = now


def timed_trainer(metrics: str | None):
    """TorchTitan's Trainer with a StepRecorder in front of its metrics logging (called once per step when
    metrics.log_freq = 1, after the loss reduction and its host read)."""
    from torchtitan.train import Trainer

    class TimedTrainer(Trainer):
        def __init__(self, job_config):
            super().__init__(job_config)
            if job_config.metrics.log_freq != 1:
                freq = job_config.metrics.log_freq
                raise SystemExit(f"metrics.log_freq = {freq}: the benchmark times every step; set it to 1")
            rank0 = not torch.distributed.is_initialized() or torch.distributed.get_rank() == 0
            recorder = StepRecorder(metrics if rank0 else None, self.device)
            log = self.metrics_processor.log

            def recorded_log(step, global_avg_loss, global_max_loss, grad_norm, extra_metrics=None):
                recorder.record(step, global_avg_loss)
                return log(step, global_avg_loss, global_max_loss, grad_norm, extra_metrics=extra_metrics)

            self.metrics_processor.log = recorded_log

    return TimedTrainer


def prepare(argv=None):
    """Parses the driver's own options, hands the rest to TorchTitan with model.name switched to the in-memory
    spec, registers that spec; returns the metrics path."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base-model", required=True, help="TorchTitan's model name whose train spec is fed in memory")
    p.add_argument("--metrics", help="JSONL written by rank 0, one line per step")
    args, rest = p.parse_known_args(argv)
    # Before any torchtitan import: ConfigManager.parse_args defaults to sys.argv[1:] as it was at that import.
    sys.argv = [sys.argv[0], *rest, "--model.name", SPEC_PREFIX + args.base_model]
    register_in_memory_spec(args.base_model)
    return args.metrics


def main(argv=None) -> None:
    metrics = prepare(argv)
    from torchtitan.train import main as torchtitan_main

    torchtitan_main(timed_trainer(metrics))


if __name__ == "__main__":
    main()
