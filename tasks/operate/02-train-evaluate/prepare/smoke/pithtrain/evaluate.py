"""Multiple-choice accuracy of a Hugging Face model directory: which of four continuations follows a passage.

Each choice is scored by the summed log-likelihood of its tokens after the passage (lm-eval's `acc`); choices
run in right-padded batches (a causal model's scores before the padding do not see it). Every item has four
choices. The tokenizer is the export's own `tokenizer.json`.
"""

import argparse
import json
from pathlib import Path

import torch
from tokenizers import Tokenizer
from transformers import AutoModelForCausalLM

ROWS_PER_BATCH = 32


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("model", type=Path, help="Hugging Face model directory with tokenizer.json")
    p.add_argument("--data", type=Path, default=Path("data/eval/continuations.jsonl"))
    args = p.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    tokenizer = Tokenizer.from_file(str(args.model / "tokenizer.json"))
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).to(device).eval()
    items = [json.loads(line) for line in args.data.read_text().splitlines() if line.strip()]
    print(f"model: {args.model.resolve()}", flush=True)
    rows = []  # (context ids, ending ids) for every choice of every item, in order
    for item in items:
        context = tokenizer.encode(item["context"]).ids
        rows += [(context, tokenizer.encode(c).ids) for c in item["choices"]]
    scores = []
    for start in range(0, len(rows), ROWS_PER_BATCH):
        batch = rows[start : start + ROWS_PER_BATCH]
        ids = torch.zeros(len(batch), max(len(c) + len(e) for c, e in batch), dtype=torch.long)
        for r, (context, ending) in enumerate(batch):
            ids[r, : len(context) + len(ending)] = torch.tensor(context + ending)
        with torch.no_grad():
            logp = model(ids.to(device)).logits.float().log_softmax(-1).cpu()
        for r, (context, ending) in enumerate(batch):
            positions = torch.arange(len(context) - 1, len(context) + len(ending) - 1)
            scores.append(logp[r, positions, ids[r, positions + 1]].sum().item())
    correct = 0
    for i, item in enumerate(items):
        mine = scores[4 * i : 4 * i + 4]
        correct += max(range(4), key=mine.__getitem__) == item["label"]
    print(f"accuracy: {correct / len(items):.4f} ({correct}/{len(items)} correct; chance 0.25)", flush=True)


if __name__ == "__main__":
    main()
