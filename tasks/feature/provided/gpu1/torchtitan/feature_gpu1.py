"""Registers the feature tasks' gpu1 flavors, read through `experimental.custom_import`: "deepseek_v2_lite_4l" (the
operate tasks' 4-layer DeepSeek-V2-Lite, deepseek_v2_lite_4l.py) and "feature_top1", the same model routing each
token to one expert, which a checker may run for one step to reach a routing case top-6 never makes."""

import dataclasses

from deepseek_v2_lite_4l import deepseekv3_args

base = deepseekv3_args["deepseek_v2_lite_4l"]
deepseekv3_args["feature_top1"] = dataclasses.replace(base, moe_args=dataclasses.replace(base.moe_args, top_k=1))
