"""Getting Started: the provided train.sh, unmodified, ran 5 steps with finite losses under `.venv`'s Python.

The provided script prints `python-prefix:` (sys.prefix) and `torch-file:` (torch.__file__) from the
Python on PATH before training, so the log itself says which interpreter ran it. On `smoke` and
`paper`, torch must also live inside `.venv` (the environment was built, not borrowed from the host);
on `gpu1` the machine has no package index, so the venv may see the host's CUDA torch.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import operate_check as oc

STEPS = 5
TORCH_FROM_HOST_OK = {"gpu1"}


def venv_failures(text: str, workspace: Path, profile: str) -> list[str]:
    venv = workspace / ".venv"
    if not (venv / "pyvenv.cfg").is_file():
        return ["no virtual environment at .venv (no .venv/pyvenv.cfg)"]
    lines = dict(
        line.split(": ", 1) for line in text.splitlines() if line.startswith(("python-prefix: ", "torch-file: "))
    )
    prefix, torch_file = lines.get("python-prefix"), lines.get("torch-file")
    if prefix is None:
        return ["the train log has no 'python-prefix:' line: the provided train.sh did not run to its first command"]
    if Path(prefix.strip()).resolve() != venv.resolve():
        return [f"train.sh ran under the Python at {prefix.strip()}, not .venv's (activate .venv first)"]
    if profile not in TORCH_FROM_HOST_OK and not Path(torch_file or "/").resolve().is_relative_to(venv.resolve()):
        return [f"torch was imported from {torch_file}, outside .venv: install it into the environment"]
    return []


def main() -> int:
    args = oc.parse_args()
    failures: list[str] = []
    ws, task_dir = args.workspace, Path(__file__).resolve().parent
    provided = oc.provided(task_dir, args.profile, args.framework, "train.sh")
    train = ws / "train.sh"
    if not train.is_file():
        failures.append("train.sh is missing from the workspace root")
    elif oc.sha256(train) != oc.sha256(provided):
        failures.append("train.sh differs from the provided one: run it unmodified")
    text = oc.read_log(ws, "train", failures)
    if text is not None:
        failures += venv_failures(text, ws, args.profile)
        oc.check_steps(oc.step_losses(text, args.framework), STEPS, "the newest train log", failures)
    return oc.finish(failures)


if __name__ == "__main__":
    sys.exit(main())
