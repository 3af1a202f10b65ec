# Sourced by the gpu1 scripts, with $scratch set: cd into a git checkout of this tree. A tree that travelled without
# .git (the device machine) is committed in a copy under $scratch first, since the gold workspaces are made with
# `git archive HEAD`.
# A .git that is there but is not the tree's (the device machine kept one from an earlier call: its HEAD is not
# PITH_GIT_COMMIT, or files differ from it) is not trusted either: `git archive HEAD` would give its tree.
repo=$(pwd)
head=$(git -C "$repo" rev-parse --verify HEAD 2>/dev/null)
if [ -z "$head" ] || { [ -n "${PITH_GIT_COMMIT:-}" ] && [ "$head" != "$PITH_GIT_COMMIT" ]; } \
  || [ -n "$(git -C "$repo" status --porcelain 2>/dev/null)" ]; then
  mkdir -p "$scratch/repo"
  tar -C "$repo" --exclude=./.git -cf - . | tar -C "$scratch/repo" -xf -
  (cd "$scratch/repo" && git init -q && git add -A && git -c user.name=gpu1 -c user.email=gpu1@localhost \
    -c commit.gpgsign=false commit -qm "the tree as it travelled (${PITH_GIT_COMMIT:-commit unknown})") \
    || { echo "could not commit the travelled tree in $scratch/repo"; exit 1; }
  repo="$scratch/repo"
fi
cd "$repo" || exit 1
