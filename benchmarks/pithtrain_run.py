"""Throughput side "pithtrain": one benchmark run of pithtrain's own trainer (`pretrain_lm.launch`), fed in memory.

    [torchrun --standalone --nproc-per-node N] benchmarks/pithtrain_run.py RUN.toml --steps S

The run is exactly `python -m pithtrain train RUN.toml` (data.kind = "synthetic") except where its samples come
from, and that it does no checkpoint work (the room for a checkpoint is not checked, its host buffers are not
allocated), as the other sides run with checkpointing off: `data.kind = "synthetic"` draws each
sample's ids inside the step; here every sample of the S steps is generated before training starts
(benchmarks/synthetic.py, as for the other sides) and the trainer's own get_batch reads them. Step times are the
trainer's own metrics.jsonl: the wall time between two steps' log lines, each written after the loss has been
reduced over the ranks and read back to the host.
"""

import argparse

from synthetic import token_rows

from pithtrain.modules import checkpoint
from pithtrain.tasks import pretrain_lm


class InMemoryTokens:
    """Sample i is row i of a tensor made before training (the sampler reads synthetic data in order)."""

    def __init__(self, rows):
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int):
        return self.rows[i]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("config", help="pithtrain run TOML with data.kind = 'synthetic'")
    p.add_argument("--steps", type=int, required=True, help="optimizer steps the run will take (samples generated)")
    args = p.parse_args(argv)
    cfg = pretrain_lm.load_pretrain_cfg(args.config, [])
    if cfg.data.kind != "synthetic":
        raise SystemExit(f"data.kind = {cfg.data.kind!r}: the benchmark feeds synthetic ids; set 'synthetic'")
    samples = args.steps * cfg.training.global_batch_size
    rows = token_rows(cfg.model.vocab_size, samples, cfg.data.seq_len, cfg.training.seed)
    dataset = InMemoryTokens(rows)
    pretrain_lm.make_dataset = lambda data_cfg, vocab_size, seed: dataset  # the trainer's one source of samples
    # The run is stopped after --steps, before its first save: the room a checkpoint would need is not checked
    # (the 8-layer shape's 67 GB exceeds the GPU machine's disk, and no checkpoint is ever written).
    pretrain_lm.check_checkpoint_dir = lambda ckpt_dir, rank_bytes: None
    # Nor are the save's host buffers allocated: pinning them (67 GB at 8 layers) runs in a background thread from
    # the first step on, through the timed steps. In the call of 20261202T174206Z pithtrain's steps varied by up to
    # 2x while TorchTitan's (checkpointing off, as megatron-core's) stayed within 1%.
    checkpoint.AsyncCheckpointer.prepare = lambda self, model, optimizer: None
    pretrain_lm.launch(cfg)


if __name__ == "__main__":
    main()
