"""Launching: the real torchrun command the README gives, and a failing rank ending the whole job."""

import subprocess
import sys
import textwrap
import time

import pytest
from conftest import REPO


def test_torchrun_ep2_trains(tiny_config, tmp_path):
    config = tiny_config(max_steps=2)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           "-m", "pithtrain", "train", str(config), "--set", "distributed.expert_parallel_size=2"]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=300, env={"OMP_NUM_THREADS": "1",
                         "PATH": "/usr/bin:/bin"})  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert "PP 1 DP 1 CP 1 EP 2" in out.stdout and "step 2/2" in out.stdout
    assert (tmp_path / "run" / "checkpoints" / "latest").read_text() == "step-00000002"


def test_train_ends_its_process_group(tiny_config, tmp_path):
    """`pithtrain train` destroys the process group once the run is done, while Python is whole: left to interpreter
    exit, gloo's worker threads once aborted a rank of test_multinode_script_on_one_node after its run succeeded."""
    import torch.distributed as dist

    from pithtrain.__main__ import main

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        assert main(["train", str(tiny_config(max_steps=1))]) == 0
        assert not dist.is_initialized()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def test_world_size_must_divide(tiny_config, tmp_path):
    config = tiny_config(max_steps=1)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           "-m", "pithtrain", "train", str(config), "--set", "distributed.context_parallel_size=4"]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=300)
    assert out.returncode != 0
    assert "world size 2 is not divisible by pipeline_parallel_size x context_parallel_size" in out.stderr


def test_a_failing_rank_ends_the_job(tmp_path):
    """Rank 1 raises while rank 0 waits in a collective: the job ends at once, not at the timeout."""
    script = tmp_path / "fail.py"
    script.write_text(
        textwrap.dedent("""
        import torch, torch.distributed as dist
        from pithtrain.modules.distributed import DistributedCfg, setup_distributed
        setup_distributed(DistributedCfg(timeout_s=600), torch.device("cpu"))
        if dist.get_rank() == 1:
            raise RuntimeError("rank 1 broke")
        dist.barrier()
    """)
    )
    start = time.monotonic()
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(script)]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=300)
    assert out.returncode != 0 and "rank 1 broke" in out.stderr
    assert time.monotonic() - start < 60


def test_multinode_script_on_one_node(tiny_config, tmp_path):
    """examples/launch/multinode.sh with the c10d rendezvous, as far as one machine allows: one node of two."""
    import os
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "NNODES": "1", "NPROC": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
           "OMP_NUM_THREADS": "1", "PATH": f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}"}  # fmt: skip
    cmd = [
        "bash",
        "examples/launch/multinode.sh",
        str(tiny_config(max_steps=1)),
        "--set",
        "distributed.expert_parallel_size=2",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "PP 1 DP 1 CP 1 EP 2" in out.stdout


@pytest.mark.parametrize("script", ["examples/launch/slurm.sbatch", "examples/launch/multinode.sh"])
def test_launch_scripts_parse(script):
    assert subprocess.run(["bash", "-n", str(REPO / script)]).returncode == 0
