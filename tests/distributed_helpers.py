"""Run a test function in N fresh processes that form one torch.distributed group (gloo on CPU by default).

`fn` must be a top-level function (spawned processes import it by name); it is called as
`fn(rank, world_size, *args)` after `init_process_group`, and its return value travels back pickled.
The group meets through a FileStore in a fresh temporary directory, so no port has to be free.
"""

import multiprocessing as mp
import os
import pickle
import queue
import tempfile
import time
import traceback
from datetime import timedelta

import torch
import torch.distributed as dist


def run_in_processes(fn, world_size: int, *args, backend: str = "gloo", timeout_s: float = 60.0) -> list:
    """fn's return values in rank order. Raises RuntimeError with each failed rank's traceback (first failure
    ends the run after a short grace: the other ranks are likely blocked on it), or TimeoutError when no rank
    failed but some gave nothing in time."""
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "store")
        procs = [
            ctx.Process(target=_worker, args=(fn, rank, world_size, args, backend, store, timeout_s, results))
            for rank in range(world_size)
        ]
        for p in procs:
            p.start()
        try:
            values, errors = _collect(procs, results, timeout_s)
        finally:
            for p in procs:
                if p.is_alive():
                    p.kill()
                p.join()
    if errors:
        raise RuntimeError("\n".join(f"rank {rank} failed:\n{tb}" for rank, tb in errors.items()))
    return [values[rank] for rank in range(world_size)]


def _collect(procs, results, timeout_s: float, grace_s: float = 2.0):
    """Values and errors by rank; errors in the order they arrived, since the first is usually the cause and
    the rest its echo (a peer's closed connection). After a first error, wait grace_s for more."""
    deadline = time.monotonic() + timeout_s
    values, errors = {}, {}
    while len(values) + len(errors) < len(procs):
        try:
            rank, payload, tb = results.get(timeout=0.2)
        except queue.Empty:
            for rank, p in enumerate(procs):
                if p.exitcode not in (None, 0) and rank not in values and rank not in errors:
                    errors[rank] = f"process exited with code {p.exitcode} without a result"
                    deadline = min(deadline, time.monotonic() + grace_s)
            if time.monotonic() > deadline:
                if errors:
                    break
                missing = sorted(set(range(len(procs))) - set(values))
                raise TimeoutError(f"ranks {missing} gave no result within {timeout_s} s") from None
            continue
        if tb is None:
            values[rank] = pickle.loads(payload)
        else:
            errors[rank] = tb
            deadline = min(deadline, time.monotonic() + grace_s)
    return values, errors


def _worker(fn, rank, world_size, args, backend, store, timeout_s, results):
    torch.set_num_threads(1)  # N processes share the machine's cores
    device_id = None
    if backend == "nccl":
        device_id = torch.device("cuda", rank)  # one GPU per rank; NCCL hangs if ranks share a device
        torch.cuda.set_device(device_id)
    try:
        dist.init_process_group(
            backend,
            init_method=f"file://{store}",
            rank=rank,
            world_size=world_size,
            timeout=timedelta(seconds=timeout_s),
            device_id=device_id,
        )
        value = fn(rank, world_size, *args)
        dist.barrier()  # no rank tears down its connections while a peer still reads from them
        dist.destroy_process_group()
        # Plain pickle copies tensors by value; the queue's own pickler would share memory with a dying process.
        results.put((rank, pickle.dumps(value), None))
    except BaseException:
        # Report before anything closes this rank's connections, so the cause arrives before its echoes.
        results.put((rank, None, traceback.format_exc()))
