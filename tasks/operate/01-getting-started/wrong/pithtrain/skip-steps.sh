#!/usr/bin/env bash
# FAILs for: shows no loss for step
# Wrong: train.sh is edited to stop after 2 steps; all else is right. The environment is made fast but passes the
# venv checks: a .venv whose torch is hard-linked from the Python on PATH (so it lies inside .venv) and whose other
# requirements come through a .pth file. The check must fail on the edit alone.
set -euo pipefail
python3 -m venv --without-pip .venv
torch=$(python -c 'import os, torch; print(os.path.dirname(torch.__file__))')
site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
cp -al "$torch" "$site/torch" 2>/dev/null || { rm -rf "$site/torch"; cp -r "$torch" "$site/torch"; }  # links: one filesystem
# every directory on python's path, not its purelib alone: a python that is a venv's finds packages through .pth files
python -c 'import os, sys; print("\n".join(p for p in sys.path if p and os.path.isdir(p)))' >"$site/host-packages.pth"
sed -i -E 's/(python -m pithtrain train [a-z0-9-]+\.toml)/\1 --set training.max_steps=2/' train.sh
grep -q 'max_steps=2' train.sh
source .venv/bin/activate
bash train.sh
