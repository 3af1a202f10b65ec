#!/usr/bin/env bash
# Megatron-LM at the benchmark's pin (3bec9aa) for a machine with no network: the harness's git mode reads the pinned
# commit from its cache (~/.cache/pithtrain-ate/git/megatron-lm.git, python -m ate_bench fills it where the network
# allows); this carries that commit alone, as a one-commit shallow bare repository (8 MB), so the device machine's
# validate runs, checkers and gold scripts see the same tree through the same git mode.
#   bash tasks/megatron_pin.sh pack    here, from the cache: writes .whl/megatron-lm-3bec9aa.git.tar.gz
#   bash tasks/megatron_pin.sh seed    there, from the repository root: unpacks it into the cache (kept if present)
set -euo pipefail
COMMIT=3bec9aa97dda898d16ff5a89bac0ed2b6682b172
CACHE=$HOME/.cache/pithtrain-ate/git  # the harness's default --cache-dir
PACKED=${MEGATRON_PIN:-.whl/megatron-lm-3bec9aa.git.tar.gz}
has_pin() { git -C "$1" rev-parse -q --verify "$COMMIT^{commit}" >/dev/null 2>&1; }
case "${1:-}" in
  pack)
    has_pin "$CACHE/megatron-lm.git" \
      || { echo "no Megatron-LM $COMMIT in $CACHE/megatron-lm.git: run python -m ate_bench validate --frameworks megatron-lm --source git once with network" >&2; exit 2; }
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    git init -q --bare "$tmp/megatron-lm.git"
    git -C "$tmp/megatron-lm.git" fetch -q --depth 1 "file://$CACHE/megatron-lm.git" "$COMMIT"
    git -C "$tmp/megatron-lm.git" update-ref refs/heads/pin "$COMMIT"
    git -C "$tmp/megatron-lm.git" symbolic-ref HEAD refs/heads/pin
    git -C "$tmp/megatron-lm.git" gc -q --prune=now
    mkdir -p "$(dirname "$PACKED")"
    tar -C "$tmp" -czf "$PACKED" megatron-lm.git
    echo "$PACKED: $(du -h "$PACKED" | cut -f1), Megatron-LM $COMMIT"
    ;;
  seed)
    if has_pin "$CACHE/megatron-lm.git"; then exit 0; fi
    [ -f "$PACKED" ] || { echo "no $PACKED to seed the cache from: make it with bash tasks/megatron_pin.sh pack and carry .whl" >&2; exit 2; }
    mkdir -p "$CACHE" && rm -rf "$CACHE/megatron-lm.git" && tar -xzf "$PACKED" -C "$CACHE"
    has_pin "$CACHE/megatron-lm.git" || { echo "$PACKED does not hold $COMMIT" >&2; exit 2; }
    ;;
  *) echo "usage: bash tasks/megatron_pin.sh pack|seed" >&2; exit 2 ;;
esac
