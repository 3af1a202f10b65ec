"""The Hugging Face round trip every model family must pass, shared by the families' test files."""

import dataclasses
import json

import torch

from pithtrain.modules.checkpoint import load_checkpoint
from pithtrain.tasks import convert_checkpoint
from pithtrain.tasks.convert_checkpoint import ConvertCheckpointCfg


def check_hf_round_trip(hf, tmp_path, cfg_from_hf, model_class, vocab_size: int) -> None:
    """`hf` (a random `transformers` model) -> pithtrain checkpoint: same logits (fp32, max abs diff < 1e-4)
    and loss; export -> transformers loads it with identical logits; import again -> identical tensors."""
    hf.save_pretrained(tmp_path / "hf")
    convert_checkpoint.launch(ConvertCheckpointCfg("hf-to-pithtrain", str(tmp_path / "hf"), str(tmp_path / "pt")))
    meta = json.loads((tmp_path / "pt" / "step-00000000" / "meta.json").read_text())
    cfg = cfg_from_hf(json.loads((tmp_path / "hf" / "config.json").read_text()))
    assert meta["model"] == dataclasses.asdict(cfg)
    model = model_class(cfg).eval()
    load_checkpoint(tmp_path / "pt" / "step-00000000", model)

    ids = torch.randint(0, vocab_size, (2, 12))
    with torch.no_grad():
        hf_out = hf(ids, labels=ids)
        ours_logits = model(ids)
        ours_loss = model(ids[:, :-1], ids[:, 1:]) / ids[:, 1:].numel()
    assert (hf_out.logits - ours_logits).abs().max() < 1e-4
    torch.testing.assert_close(ours_loss, hf_out.loss, rtol=1e-5, atol=1e-6)

    convert_checkpoint.launch(
        ConvertCheckpointCfg("pithtrain-to-hf", str(tmp_path / "pt"), str(tmp_path / "hf2"), dtype="float32")
    )
    hf2 = type(hf).from_pretrained(tmp_path / "hf2").eval()
    with torch.no_grad():
        assert (hf2(ids).logits - hf_out.logits).abs().max() == 0
    convert_checkpoint.launch(ConvertCheckpointCfg("hf-to-pithtrain", str(tmp_path / "hf2"), str(tmp_path / "pt2")))
    again = model_class(cfg)
    load_checkpoint(tmp_path / "pt2" / "step-00000000", again)
    for (n, a), (_, b) in zip(model.state_dict().items(), again.state_dict().items()):
        assert torch.equal(a, b), n
