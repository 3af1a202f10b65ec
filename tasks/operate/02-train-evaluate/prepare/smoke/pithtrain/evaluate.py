"""Multiple-choice accuracy of a Hugging Face model directory: which of four continuations follows a passage.

Each choice is scored by the summed log-likelihood of its tokens after the passage (lm-eval's `acc`); the
four choices of an item run as one right-padded batch (a causal model's scores before the padding do not
see it). The tokenizer is the export's own `tokenizer.json`.
"""

import argparse
import json
from pathlib import Path

import torch
from tokenizers import Tokenizer
from transformers import AutoModelForCausalLM


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
    correct = 0
    for item in items:
        context = tokenizer.encode(item["context"]).ids
        endings = [tokenizer.encode(c).ids for c in item["choices"]]
        width = len(context) + max(map(len, endings))
        ids = torch.zeros(len(endings), width, dtype=torch.long)
        for row, ending in enumerate(endings):
            ids[row, : len(context) + len(ending)] = torch.tensor(context + ending)
        with torch.no_grad():
            logp = model(ids.to(device)).logits.float().log_softmax(-1).cpu()
        scores = []
        for row, ending in enumerate(endings):
            positions = torch.arange(len(context) - 1, len(context) + len(ending) - 1)
            scores.append(logp[row, positions, ids[row, positions + 1]].sum().item())
        correct += max(range(len(scores)), key=scores.__getitem__) == item["label"]
    print(f"accuracy: {correct / len(items):.4f} ({correct}/{len(items)} correct; chance 0.25)", flush=True)


if __name__ == "__main__":
    main()
