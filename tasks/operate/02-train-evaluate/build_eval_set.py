"""Build the Train & Evaluate task's data (smoke and gpu1 profiles) from text already on the machine.

- `data/corpus.jsonl` and `data/tokenizer/`: the repository's shipped corpus (the Python language reference
  that ships in CPython) and its 2,048-token BPE, copied from examples/data/tiny/.
- `data/eval/continuations.jsonl`: a multiple-choice set that needs no download. Each item is a passage
  from a docstring of CPython's standard library (text the corpus does not hold) cut at a word boundary,
  its true continuation, and three continuations taken from other passages; the model is asked which of
  the four follows. Accuracy is the share of items whose true continuation has the highest summed
  log-likelihood (lm-eval's `acc`); chance is 0.25.

    python tasks/operate/02-train-evaluate/build_eval_set.py   (from the repository root)

The set is committed; rebuilding on another CPython version gives another (equally valid) set.
"""

import ast
import json
import random
import shutil
import sysconfig
from pathlib import Path

OUT = Path(__file__).resolve().parent / "data"
SHIPPED = Path("examples/data/tiny")
ITEMS = 100
CONTEXT_CHARS, CONTINUATION_CHARS = 240, 80
SEED = 2026


def docstrings() -> list[str]:
    """Docstrings of the standard library's modules, classes and functions, long enough for one item."""
    found = []
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                doc = ast.get_docstring(node)
                if doc and len(doc) > CONTEXT_CHARS + CONTINUATION_CHARS + 20 and ">>>" not in doc:
                    found.append(" ".join(doc.split()))
    return found


def cut(text: str, n: int) -> str:
    """The first n characters, shortened to the last whole word."""
    return text[:n].rsplit(" ", 1)[0]


def main() -> None:
    rng = random.Random(SEED)
    docs = sorted(set(docstrings()))
    picked = rng.sample(docs, ITEMS)
    pairs = []
    for doc in picked:
        context = cut(doc, CONTEXT_CHARS)
        pairs.append((context, " " + cut(doc[len(context) :].lstrip(), CONTINUATION_CHARS)))
    items = []
    for i, (context, truth) in enumerate(pairs):
        others = [pairs[j][1] for j in rng.sample([j for j in range(len(pairs)) if j != i], 3)]
        choices = [truth, *others]
        rng.shuffle(choices)
        items.append({"context": context, "choices": choices, "label": choices.index(truth)})

    shutil.rmtree(OUT, ignore_errors=True)
    (OUT / "eval").mkdir(parents=True)
    shutil.copy(SHIPPED / "corpus.jsonl", OUT / "corpus.jsonl")
    shutil.copytree(SHIPPED / "tokenizer", OUT / "tokenizer")
    with open(OUT / "eval" / "continuations.jsonl", "w") as f:
        for item in items:
            f.write(json.dumps(item) + "\n")
    print(f"wrote {OUT}: {len(items)} items from {len(docs)} docstrings")


if __name__ == "__main__":
    main()
