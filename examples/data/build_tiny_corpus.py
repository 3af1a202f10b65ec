"""Build the shipped tiny corpus, its tokenizer and its token shards from text already on the machine.

The text is the Python language reference that ships inside CPython (`pydoc_data.topics`): real
English prose with code, one document per topic, no download. A byte-level BPE tokenizer with a
2,048-token vocabulary is trained on it with the `tokenizers` library, then `pithtrain tokenize`
packs the corpus. Output (committed, so the quick start needs no step): examples/data/tiny/.

    python examples/data/build_tiny_corpus.py   (from the repository root)
"""

import json
import shutil
from pathlib import Path
from pydoc_data.topics import topics

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from pithtrain.tasks.tokenize_corpus import TokenizeCorpusCfg, launch

OUT = Path("examples/data/tiny")  # relative, so the index records a portable tokenizer path
VOCAB_SIZE = 2048
EOS = "<|endoftext|>"


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    (OUT / "tokenizer").mkdir(parents=True)
    docs = [topics[name] for name in sorted(topics)]
    with open(OUT / "corpus.jsonl", "w") as f:
        for doc in docs:
            f.write(json.dumps({"text": doc}) + "\n")

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE, special_tokens=[EOS], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tokenizer.train_from_iterator(docs, trainer=trainer)
    tokenizer.save(str(OUT / "tokenizer" / "tokenizer.json"))
    (OUT / "tokenizer" / "tokenizer_config.json").write_text(json.dumps({"eos_token": EOS}, indent=1))

    launch(
        TokenizeCorpusCfg(
            inputs=[str(OUT / "corpus.jsonl")], tokenizer=str(OUT / "tokenizer"), output=str(OUT / "tokens")
        )
    )


if __name__ == "__main__":
    main()
