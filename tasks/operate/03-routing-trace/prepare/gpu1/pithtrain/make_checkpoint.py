"""Write the gpu1 profile's provided checkpoint: weights for checkpoint/config.json (DeepSeek-V2-Lite's shape cut
to 4 layers, 2.25B parameters) drawn by `transformers` from a fixed seed, saved in bfloat16 into checkpoint/.

Too large to ship (4.5 GB), so it is made here, deterministically on a given machine. Run it once, first:

    python make_checkpoint.py
"""

import shutil
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM

config = AutoConfig.from_pretrained("checkpoint")
torch.manual_seed(0)
with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
model.save_pretrained("checkpoint-weights")  # beside, so the provided config.json stays as it is
for f in Path("checkpoint-weights").glob("*.safetensors*"):
    shutil.move(f, Path("checkpoint") / f.name)
shutil.rmtree("checkpoint-weights")
print("wrote the weights into checkpoint/")
