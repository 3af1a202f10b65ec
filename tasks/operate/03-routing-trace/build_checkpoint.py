"""Build the routing-trace task's provided smoke checkpoint: the smoke model trained 50 steps on the shipped corpus.

Trained with pithtrain from its seeded initialisation (examples/data/tiny tokens, the shape of
prepare/smoke/pithtrain/routing.toml), then exported in float32 to Hugging Face format (1.7 MB), the
form every framework converts from, as the paper's runs started from the released Hugging Face weights.

    python tasks/operate/03-routing-trace/build_checkpoint.py   (from the repository root)
"""

import shutil
import tempfile
from pathlib import Path

from pithtrain.tasks import convert_checkpoint, pretrain_lm

HERE = Path(__file__).resolve().parent
OUT = HERE / "checkpoint"


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        overrides = [f"run_dir={tmp}/run", "training.max_steps=50", "training.global_batch_size=8", "training.lr=3e-3"]
        pretrain_lm.launch(pretrain_lm.load_pretrain_cfg(str(HERE / "prepare/smoke/pithtrain/routing.toml"), overrides))
        shutil.rmtree(OUT, ignore_errors=True)
        cfg = convert_checkpoint.ConvertCheckpointCfg(
            "pithtrain-to-hf", f"{tmp}/run/checkpoints", str(OUT), dtype="float32"
        )
        convert_checkpoint.launch(cfg)


if __name__ == "__main__":
    main()
