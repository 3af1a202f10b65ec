#!/usr/bin/env bash
# What each operate gold costs to write, per framework: the files in gold/<framework>/ (what an agent would add to or
# run in the workspace) and their lines. results/ate/cost/operate_gold_cost.md adds the checker's side and attempts.
# From the repository root: bash tasks/operate/gold_cost.sh > results/ate/cost/operate_gold_cost.tsv
set -euo pipefail
printf 'task\tframework\tgold_files\tgold_lines\n'
for task in tasks/operate/0*/; do
  for fw in pithtrain torchtitan megatron-lm; do
    gold="$task/gold/$fw"
    [ -d "$gold" ] || continue
    files=$(find "$gold" -type f | wc -l)
    lines=$(find "$gold" -type f -exec cat {} + | wc -l)
    printf '%s\t%s\t%s\t%s\n' "$(basename "$task")" "$fw" "$files" "$lines"
  done
done
