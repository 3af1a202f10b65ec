#!/usr/bin/env bash
# Megatron-LM at the benchmark's pin (3bec9aa) for a machine with no network: the harness's git mode reads the pinned
# commit from its cache (~/.cache/pithtrain-ate/git/megatron-lm.git, which python -m ate_bench fills where the network
# allows), or else from a `git archive` of that commit carried beside it. The archive leaves out what no run needs
# (LEFT_OUT: the unit tests, docs and images, 6 of the tree's 8 MB compressed) to fit the device call's 64 MiB;
# megatron-lm-3bec9aa.left-out lists them, and every workspace made from it records the list.
#   bash tasks/megatron_pin.sh pack    here, from the cache: .whl/megatron-lm-3bec9aa.tar.gz (2.4 MB) and its .left-out
#   bash tasks/megatron_pin.sh seed    there, from the repository root: both into the harness's cache
set -euo pipefail
COMMIT=3bec9aa
CACHE=$HOME/.cache/pithtrain-ate/git  # the harness's default --cache-dir
LEFT_OUT="tests docs images"
NAME=megatron-lm-$COMMIT
case "${1:-}" in
  pack)
    git -C "$CACHE/megatron-lm.git" rev-parse -q --verify "$COMMIT^{commit}" >/dev/null \
      || { echo "no Megatron-LM $COMMIT in $CACHE/megatron-lm.git: run python -m ate_bench validate --frameworks megatron-lm --source git once with network" >&2; exit 2; }
    mkdir -p .whl
    excludes=()
    for p in $LEFT_OUT; do excludes+=(":(exclude)$p"); done
    git -C "$CACHE/megatron-lm.git" archive --format=tar "$COMMIT" -- . "${excludes[@]}" | gzip -9 > ".whl/$NAME.tar.gz"
    echo "$LEFT_OUT" | tr ' ' '\n' > ".whl/$NAME.left-out"
    echo ".whl/$NAME.tar.gz: $(du -h ".whl/$NAME.tar.gz" | cut -f1), Megatron-LM $COMMIT without $LEFT_OUT"
    ;;
  seed)
    [ -f ".whl/$NAME.tar.gz" ] || { echo "no .whl/$NAME.tar.gz to seed the cache from: make it with bash tasks/megatron_pin.sh pack and carry .whl" >&2; exit 2; }
    mkdir -p "$CACHE" && cp ".whl/$NAME.tar.gz" ".whl/$NAME.left-out" "$CACHE/"
    ;;
  *) echo "usage: bash tasks/megatron_pin.sh pack|seed" >&2; exit 2 ;;
esac
