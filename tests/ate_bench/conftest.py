from pathlib import Path

import pytest

from ate_bench.workspace import DEFAULT_CACHE_DIR, NetworkError, materialize


@pytest.fixture(scope="module")
def megatron_pin(tmp_path_factory) -> Path:
    """One materialized Megatron-LM pin per test module, which copies it per case (git mode: the mirror or carried
    archive, else a fetch); skips where there is none and no network, or megatron.training's imports are missing."""
    dest = tmp_path_factory.mktemp("megatron") / "pin"
    try:
        materialize("megatron-lm", dest, mode="git", skills=False, cache_dir=DEFAULT_CACHE_DIR)
    except NetworkError as e:
        pytest.skip(f"no Megatron-LM pin here and no network to fetch it: {str(e).splitlines()[0]}")
    for module in ("six", "pydantic"):  # what megatron.training imports beyond torch
        pytest.importorskip(module, reason=f"megatron.training imports {module}: pip install {module}")
    return dest
