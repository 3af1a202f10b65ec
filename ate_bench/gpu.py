"""Active GPU time: poll NVML (through `nvidia-smi`) and attribute GPU contexts to the agent's processes.

The paper counts "wall time of the training/verification runs the agent launched". A run is visible to
NVML as a compute context held by a process; we sample once a second which processes hold contexts
on which GPU and how busy each GPU is, and keep the samples where the holder is one of the agent's
processes. The sample source is a plain callable so tests can inject readings.
"""

import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ate_bench.metrics import GpuUsage


@dataclass
class GpuReading:
    """One GPU at one sampling instant."""

    index: int
    util_percent: float
    """NVML `utilization.gpu`: percent of the last sample period a kernel was running."""
    pids: list[int]
    """Processes holding a compute context on this GPU."""


# Returns the readings of every GPU, or None where no GPU can be read.
SampleSource = Callable[[], list[GpuReading] | None]


def _smi(*query: str) -> list[list[str]]:
    out = subprocess.run(
        ["nvidia-smi", *query, "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        timeout=10,
        check=True,
    ).stdout
    return [[f.strip() for f in line.split(",")] for line in out.splitlines() if line.strip()]


def nvidia_smi_source() -> list[GpuReading] | None:
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        gpus = _smi("--query-gpu=index,uuid,utilization.gpu")
        apps = _smi("--query-compute-apps=gpu_uuid,pid")
    except (subprocess.SubprocessError, OSError):
        return None
    pids_by_uuid: dict[str, list[int]] = {}
    for uuid, pid in apps:
        pids_by_uuid.setdefault(uuid, []).append(int(pid))
    return [
        GpuReading(int(index), float(util) if util.replace(".", "").isdigit() else 0.0, pids_by_uuid.get(uuid, []))
        for index, uuid, util in gpus
    ]


def gpu_inventory() -> list[dict[str, str]]:
    """Name, memory and driver of each visible GPU, for the run record; [] without a GPU."""
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        rows = _smi("--query-gpu=index,name,memory.total,driver_version")
    except (subprocess.SubprocessError, OSError):
        return []
    return [dict(zip(("index", "name", "memory_mib", "driver"), r, strict=False)) for r in rows]


class GpuSampler:
    """Accumulates GpuUsage from periodic samples; `sample()` is the step, `start()`/`stop()` the thread."""

    def __init__(
        self,
        source: SampleSource,
        is_agent_pid: Callable[[int], bool],
        interval_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.source, self.is_agent_pid, self.interval_s, self.clock = source, is_agent_pid, interval_s, clock
        self.usage = GpuUsage(active_s=0.0, context_s=0.0, util_s=0.0, n_gpus=0)
        self._last = clock()
        self._no_gpu = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample(self) -> None:
        """Read the source once and credit the time since the previous sample to what it shows."""
        now = self.clock()
        dt, self._last = now - self._last, now
        readings = self.source()
        if readings is None:
            self._no_gpu = True
            return
        self.usage.n_gpus = max(self.usage.n_gpus, len(readings))
        held = [r for r in readings if any(self.is_agent_pid(p) for p in r.pids)]
        if held:
            self.usage.active_s += dt
        self.usage.context_s += dt * len(held)
        self.usage.util_s += sum(dt * r.util_percent / 100.0 for r in held)

    def start(self) -> None:
        def loop() -> None:
            while not self._stop.wait(self.interval_s):
                self.sample()

        self._last = self.clock()
        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()

    def stop(self) -> GpuUsage:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample()  # the tail since the last tick; also learns "no GPU" on runs shorter than a tick
        if self._no_gpu and self.usage.n_gpus == 0:
            self.usage.notes.append("no NVIDIA GPU visible (nvidia-smi absent or failing): active GPU time is 0")
        return self.usage
