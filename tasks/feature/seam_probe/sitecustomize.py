"""Run by Python at start-up when this folder is on PYTHONPATH, which feature_check.py arranges only for the
verify.sh run with the feature on: loads the task's check.py (FEATURE_SEAM_CHECK) and wraps the op that
artifacts/feature.json names (FEATURE_SEAM_OP; FEATURE_SEAM_AUX too where the task names a second function) so
that every call the model makes is recorded into FEATURE_SEAM_OUT. Any other sitecustomize on the path still runs
after this one."""

import importlib.util
import os
import runpy
import sys
from pathlib import Path

if os.environ.get("FEATURE_SEAM_CHECK"):
    path_before = list(sys.path)
    spec = importlib.util.spec_from_file_location("feature_seam_check", os.environ["FEATURE_SEAM_CHECK"])
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    sys.path[:] = path_before  # check.py put tasks/feature first; the trainer must not see it
    sys.modules["feature_check"].install_seam_probe(
        check.SPEC, os.environ["FEATURE_SEAM_OP"], os.environ["FEATURE_SEAM_OUT"]
    )
    if os.environ.get("FEATURE_SEAM_AUX"):  # a second function the task names (DynMoE's auxiliary loss)
        sys.modules["feature_check"].install_seam_probe(
            check.SPEC.aux, os.environ["FEATURE_SEAM_AUX"], os.environ["FEATURE_SEAM_OUT"], name="aux-seam"
        )

here = Path(__file__).resolve().parent
later = [d for d in sys.path if d and Path(d).resolve() != here and (Path(d) / "sitecustomize.py").is_file()]
if later:
    runpy.run_path(str(Path(later[0]) / "sitecustomize.py"), run_name="sitecustomize")
