"""The GPU sampler with an injected sample source and clock."""

import pytest

from ate_bench.gpu import GpuReading, GpuSampler

AGENT_PIDS = {101, 102}


def _sampler(script):
    """A sampler whose source replays `script` (one list of readings or None per tick, 1 s apart)."""
    clock = {"t": 0.0}
    ticks = iter(script)

    def source():
        return next(ticks)

    def fake_clock():
        return clock["t"]

    sampler = GpuSampler(source, is_agent_pid=lambda pid: pid in AGENT_PIDS, clock=fake_clock)

    def tick():
        clock["t"] += 1.0
        sampler.sample()

    return sampler, tick


def test_agent_contexts_utilisation_and_other_users():
    sampler, tick = _sampler(
        [
            # t=1: only someone else's process (pid 999) on GPU 0: not the agent's.
            [GpuReading(0, 90.0, [999]), GpuReading(1, 0.0, [])],
            # t=2: the agent's training holds both GPUs at 50 % and 100 %.
            [GpuReading(0, 50.0, [101]), GpuReading(1, 100.0, [102])],
            # t=3: only GPU 1 held, idle at 0 %.
            [GpuReading(0, 80.0, [999]), GpuReading(1, 0.0, [102])],
            # t=4: nothing held.
            [GpuReading(0, 0.0, []), GpuReading(1, 0.0, [])],
        ]
    )
    for _ in range(4):
        tick()
    u = sampler.usage
    # Wall time with any agent context: ticks 2 and 3 = 2 s.
    assert u.active_s == pytest.approx(2.0)
    # Per-GPU context seconds summed: tick 2 (2 GPUs) + tick 3 (1 GPU) = 3 s.
    assert u.context_s == pytest.approx(3.0)
    # Utilisation-weighted, held GPUs only: tick 2: 0.5 + 1.0; tick 3: 0.0. = 1.5 s.
    assert u.util_s == pytest.approx(1.5)
    assert u.n_gpus == 2


def test_no_gpu_records_zero_with_a_note():
    sampler = GpuSampler(lambda: None, is_agent_pid=lambda pid: True, interval_s=0.01)
    sampler.start()
    usage = sampler.stop()
    assert usage.active_s == 0.0 and usage.n_gpus == 0
    assert any("no NVIDIA GPU" in n for n in usage.notes)
