#!/usr/bin/env bash
# Megatron-LM at the benchmark's pin (3bec9aa) for a machine with no network: the harness's git mode reads the pinned
# commit from its cache (~/.cache/pithtrain-ate/git/megatron-lm.git, which python -m ate_bench fills where the network
# allows), or else from a `git archive` of that commit carried beside it. The archive leaves out what no run needs
# (LEFT_OUT: unit tests, docs, images, examples and the uv lock file, 7 of the tree's 8 MB compressed) to fit the
# device call's 64 MiB; megatron-lm-3bec9aa.left-out lists them, and every workspace made from it records the list.
#   bash tasks/megatron_pin.sh pack    here, from the cache: .whl/megatron-lm-3bec9aa.tar.xz (1.1 MB) and its .left-out
#   bash tasks/megatron_pin.sh seed    there, from the repository root: both into the harness's cache
#   bash tasks/megatron_pin.sh unpack DIR    there: the archive's tree into DIR (Python's lzma: the image may lack xz)
set -euo pipefail
COMMIT=3bec9aa
CACHE=$HOME/.cache/pithtrain-ate/git  # the harness's default --cache-dir
LEFT_OUT="tests docs images examples uv.lock"
NAME=megatron-lm-$COMMIT
case "${1:-}" in
  pack)
    git -C "$CACHE/megatron-lm.git" rev-parse -q --verify "$COMMIT^{commit}" >/dev/null \
      || { echo "no Megatron-LM $COMMIT in $CACHE/megatron-lm.git: run python -m ate_bench validate --frameworks megatron-lm --source git once with network" >&2; exit 2; }
    mkdir -p .whl
    excludes=()
    for p in $LEFT_OUT; do excludes+=(":(exclude)$p"); done
    git -C "$CACHE/megatron-lm.git" archive --format=tar "$COMMIT" -- . "${excludes[@]}" | xz -9e > ".whl/$NAME.tar.xz"
    echo "$LEFT_OUT" | tr ' ' '\n' > ".whl/$NAME.left-out"
    echo ".whl/$NAME.tar.xz: $(du -h ".whl/$NAME.tar.xz" | cut -f1), Megatron-LM $COMMIT without $LEFT_OUT"
    ;;
  seed)
    [ -f ".whl/$NAME.tar.xz" ] || { echo "no .whl/$NAME.tar.xz to seed the cache from: make it with bash tasks/megatron_pin.sh pack and carry .whl" >&2; exit 2; }
    mkdir -p "$CACHE" && cp ".whl/$NAME.tar.xz" ".whl/$NAME.left-out" "$CACHE/"
    ;;
  unpack)
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter="tar")' \
      ".whl/$NAME.tar.xz" "$2"
    ;;
  *) echo "usage: bash tasks/megatron_pin.sh pack|seed|unpack DIR" >&2; exit 2 ;;
esac
