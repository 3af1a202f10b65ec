"""The three frameworks under test, as data: where each one's pinned source comes from.

`pithtrain` is this repository at HEAD (`git archive`), minus the benchmark itself so the agent never
sees checkers or gold solutions. The other two come from their git repository at the commit the paper
pinned when the network allows, else from the PyPI source distribution at a pinned version and sha256.
The sdists are smaller than the repositories; what each lacks is recorded in `pypi_lacks` and copied
into every run record of that mode.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class FrameworkSource:
    name: str
    git_url: str
    """Empty for `pithtrain`, which is archived from this repository."""
    git_commit: str
    """The paper's pin (a prefix is enough; the full hash resolved at checkout is recorded)."""
    pypi_requirement: str
    """`name==version` for `pip download --no-deps --no-binary :all:`; empty where there is none."""
    pypi_filename: str
    pypi_sha256: str
    pypi_lacks: str
    """What the sdist does not hold that the git tree does."""
    entry_point: str
    """The training entry point (git or repo mode): where `cost` counts import hops from."""
    pypi_entry_point: str
    """The same in PyPI mode, where the sdist may lack the git tree's entry script."""
    exclude: tuple[str, ...] = ()
    """Paths left out of the workspace."""

    def entry_for(self, mode: str) -> str:
        return self.pypi_entry_point if mode == "pypi" else self.entry_point


FRAMEWORKS: dict[str, FrameworkSource] = {
    "pithtrain": FrameworkSource(
        name="pithtrain",
        git_url="",
        git_commit="HEAD",
        pypi_requirement="",
        pypi_filename="",
        pypi_sha256="",
        pypi_lacks="",
        entry_point="pithtrain/__main__.py",
        pypi_entry_point="",
        # The benchmark (harness, tasks, results) and the paper with its fixtures: never the agent's to see.
        exclude=(
            "ate_bench",
            "tasks",
            "tests/ate_bench",
            "tests/fixtures/ate",
            "results",
            "paper",
            "tests/fixtures/paper",
        ),
    ),
    "megatron-lm": FrameworkSource(
        name="megatron-lm",
        git_url="https://github.com/NVIDIA/Megatron-LM.git",
        git_commit="3bec9aa",
        # 0.19.2 declares Requires-Python >=3.12; the download passes --ignore-requires-python.
        pypi_requirement="megatron-core==0.19.2",
        pypi_filename="megatron_core-0.19.2.tar.gz",
        pypi_sha256="de643eee32007a7504ad52f061103fe7432503603b6321c16c861eb67dbd3353",
        pypi_lacks="megatron/core and megatron/training only: no pretrain_gpt.py, examples/ or tests/",
        entry_point="pretrain_gpt.py",
        pypi_entry_point="megatron/training/training.py",  # pretrain_gpt.py is git-only
    ),
    "torchtitan": FrameworkSource(
        name="torchtitan",
        git_url="https://github.com/pytorch/torchtitan.git",
        git_commit="73a0e69",  # the v0.2.2 tag: its files match the sdist's (checked on four of them)
        pypi_requirement="torchtitan==0.2.2",
        pypi_filename="torchtitan-0.2.2.tar.gz",
        pypi_sha256="f96babf03ce954dbd9078dab04eed61874c9144e23152bebca7be508de9eefd4",
        pypi_lacks="the torchtitan package only: no tests/assets (test tokenizer and dataset)",
        entry_point="torchtitan/train.py",
        pypi_entry_point="torchtitan/train.py",
    ),
}

SOURCE_MODES = ("auto", "git", "pypi")
