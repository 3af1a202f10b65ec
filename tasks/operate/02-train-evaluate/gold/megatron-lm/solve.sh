#!/usr/bin/env bash
# No gold for 02-train-evaluate on megatron-lm: every profile of this cell is [unrunnable] in task.toml, which says why.
echo "no gold for 02-train-evaluate on megatron-lm: see [unrunnable] in task.toml" >&2
exit 2
