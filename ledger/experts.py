"""How a MoE layer's routed experts split across ranks, as vLLM's FusedMoE splits them
(vllm/model_executor/layers/fused_moe/config.py FusedMoEParallelConfig.make and layer.py
determine_expert_map at v0.21.0; the same rule in fused_moe/layer.py at v0.8.5).

The experts are split over every rank of the tp x dp group, not one replica's tp ranks:
flatten_tp_across_dp_and_pcp makes the MoE tensor-parallel size tp x dp. Without
--enable-expert-parallel each expert's width (its intermediate rows) is cut tp x dp ways; with
it (use_ep) each rank holds whole experts, E // (tp x dp) of them, the first E % (tp x dp)
ranks one more. Attention, norms, embeddings and the router stay per replica (sharded by tp
only: vllm/config/parallel.py ParallelConfig data_parallel_size: each DP rank runs its own
copy of the dense part)."""

from dataclasses import dataclass, replace

from .errors import SpecError
from .tensors import TensorGroup


@dataclass(frozen=True)
class ExpertSplit:
    """devices: ranks the routed experts are spread over (tp, or tp x dp); expert_parallel:
    whole experts per rank; rank: this rank's place among them (the first E % devices hold
    one expert more: rank 0 holds the most)."""

    devices: int = 1
    expert_parallel: bool = False
    rank: int = 0

    @classmethod
    def of(cls, tp: int, dp: int, enable_expert_parallel: bool) -> "ExpertSplit":
        devices = tp * dp
        return cls(devices, enable_expert_parallel and devices > 1)

    def local_experts(self, num_experts: int) -> int:
        """determine_expert_map: E // devices, + 1 on the first E % devices ranks."""
        if not self.expert_parallel:
            return num_experts
        base, extra = divmod(num_experts, self.devices)
        return base + (self.rank < extra)

    def shard(self, group: TensorGroup, num_experts: int, hidden: int) -> TensorGroup:
        """A routed-experts group (mats x E matrices, or their biases) on this rank."""
        if self.expert_parallel:
            return replace(group, count=group.count // num_experts
                           * self.local_experts(num_experts))
        if group.name == "mlp.experts.bias":  # gate/up biases split, the down bias whole
            return replace(group, cols=(group.cols - hidden) // self.devices + hidden)
        return replace(group, rows=group.rows // self.devices)

    def check(self, num_experts: int, width: int, name: str) -> None:
        """Each expert's width splits evenly (FusedMoE asserts intermediate % tp == 0); under
        expert parallelism every rank must hold at least one expert."""
        if self.expert_parallel and num_experts < self.devices:
            raise SpecError("--enable-expert-parallel", True, f"{self.devices} ranks (tp x dp) "
                            f"for the {num_experts} experts of {name}: at most {num_experts}")
        if not self.expert_parallel and width % self.devices:
            raise SpecError("--data-parallel-size", self.devices, f"tp x dp = {self.devices} "
                            f"must divide the expert width {width} of {name} (vLLM splits "
                            "each expert across every tp x dp rank without "
                            "--enable-expert-parallel)")
