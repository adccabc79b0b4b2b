"""A weight tensor group: shape, count and kind (embedding, head, matmul weight, vector)."""

from dataclasses import dataclass

EMBED = "embed"
HEAD = "lm_head"
LINEAR = "linear"  # a 2-D matmul weight: the thing quantization formats pack
VECTOR = "vector"  # norms, biases, sinks: kept in the checkpoint dtype


@dataclass(frozen=True)
class TensorGroup:
    """`count` tensors of shape (rows, cols); `name` follows Hugging Face module paths."""

    name: str
    rows: int
    cols: int
    count: int
    kind: str
    layers: tuple[int, ...] = ()

    @property
    def numel(self) -> int:
        return self.rows * self.cols * self.count
