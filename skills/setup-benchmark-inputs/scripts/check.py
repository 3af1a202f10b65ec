"""PASS when the prepared inputs load as training would load them; else FAIL: <reason>.

    python skills/setup-benchmark-inputs/scripts/check.py --tokens DIR [--checkpoint DIR] [--vocab-size N]
        [--seq-len 128]

Token shards: `pithtrain.modules.data.TokenShardDataset` (index, every shard's size and largest token id
against the vocabulary), then the first sample. The vocabulary is the checkpoint's `model.vocab_size`, or
`--vocab-size`. Checkpoint: `pithtrain.modules.checkpoint.verify_checkpoint` (every file's size and CRC32),
then its weights loaded into the model its meta.json describes (built on CPU: needs the model's fp32 size in
memory).
"""

import argparse
import sys

import torch

from pithtrain.config import UserInputError, load_dataclass
from pithtrain.models import model_family
from pithtrain.modules.checkpoint import load_checkpoint, read_meta, verify_checkpoint
from pithtrain.modules.data import TokenShardDataset


def problems(args) -> list[str]:
    found, vocab_size = [], args.vocab_size
    if args.checkpoint:
        try:
            meta = read_meta(args.checkpoint)
            if not verify_checkpoint(meta["path"]):
                found.append(f"{meta['path']} was saved without checksums: nothing proves its files are whole")
            family = model_family(meta["model"]["family"])
            with torch.device("cpu"):
                model = family.model_class(load_dataclass(family.cfg_class, meta["model"]))
            load_checkpoint(meta["path"], model)
            vocab_size = vocab_size or meta["model"]["vocab_size"]
        except (UserInputError, RuntimeError, KeyError) as e:
            found.append(f"checkpoint {args.checkpoint} does not load: {e}")
    if vocab_size is None:
        return found + ["give --vocab-size (or --checkpoint, whose model.vocab_size is used)"]
    try:
        dataset = TokenShardDataset(str(args.tokens), args.seq_len, vocab_size)
        assert dataset[0].shape == (args.seq_len + 1,)
    except UserInputError as e:
        found.append(f"tokens {args.tokens} do not load: {e}")
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", required=True, help="token shard directory")
    ap.add_argument("--checkpoint", help="pithtrain checkpoint directory")
    ap.add_argument("--vocab-size", type=int, help="model vocabulary (default: the checkpoint's)")
    ap.add_argument("--seq-len", type=int, default=128, help="sequence length the run will use")
    found = problems(ap.parse_args())
    for reason in found:
        print(f"FAIL: {reason}")
    if not found:
        print("PASS (the token shards and the checkpoint load)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
