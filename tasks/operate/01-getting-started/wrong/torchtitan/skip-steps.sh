#!/usr/bin/env bash
# Wrong: train.sh is edited to stop after 2 steps (`--training.steps 2` after its job config, which sets 5); all else
# is right. The environment is made fast but passes the venv checks: a .venv whose torch is hard-linked from the
# Python on PATH (so it lies inside .venv) and whose other requirements (torchdata, datasets, tyro, ...) come through a
# .pth file; TorchTitan itself is the workspace's source, which train.sh puts first on PYTHONPATH. The check must fail
# on the edit alone.
set -euo pipefail
python3 -m venv --without-pip .venv
host=$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
cp -al "$host/torch" "$site/torch" 2>/dev/null || { rm -rf "$site/torch"; cp -r "$host/torch" "$site/torch"; }  # links: one filesystem
echo "$host" >"$site/host-packages.pth"
sed -i -E 's/(--job\.config_file [a-z0-9_-]+\.toml)/\1 --training.steps 2/' train.sh
grep -q 'training.steps 2' train.sh
source .venv/bin/activate
bash train.sh
