"""Process-wide parallel state. `modules.distributed.setup_distributed` fills it once; code reads it
module-qualified (`distributed.ep_size`, `distributed.cp_group`). The defaults describe one process."""

from torch.distributed import ProcessGroup
from torch.distributed.device_mesh import DeviceMesh

world_size: int = 1
rank: int = 0
local_rank: int = 0

# Mesh (PP, DP, CP, EP), outer to inner: EP and CP, the chattiest, stay on neighbouring ranks.
mesh: DeviceMesh | None = None
pp_size: int = 1
dp_size: int = 1
cp_size: int = 1
ep_size: int = 1
pp_rank: int = 0
dp_rank: int = 0
cp_rank: int = 0
ep_rank: int = 0
cp_group: ProcessGroup | None = None
ep_group: ProcessGroup | None = None

# EP ranks see different data, so a batch is split over DP x EP ranks (the mesh's dp_size is DP alone).
dp_ep_rank: int = 0
dp_ep_size: int = 1

# FSDP meshes: non-expert weights shard over DP x CP x EP, expert weights over DP x CP (under HSDP: 2-D meshes
# that replicate across DP and shard over CP x EP and CP).
dense_fsdp_mesh: DeviceMesh | None = None
expert_fsdp_mesh: DeviceMesh | None = None
dp_cp_ep_group: ProcessGroup | None = None  # token counts, loss sums

# Pipeline point-to-point: one group per (neighbour pair, channel), so each channel is a FIFO of its own.
# Keys: ("fwd0", r) carries phase-0 activations r -> r+1; ("bwd0", r) their gradients r+1 -> r;
# ("fwd1", r) carries phase-1 activations r+1 -> r; ("bwd1", r) their gradients r -> r+1.
pp_channels: dict[tuple[str, int], ProcessGroup] = {}
