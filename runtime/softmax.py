"""What a layer's attention softmax adds to the plain one: its own scale, and sinks."""

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Softmax:
    """What a layer's softmax adds to plain softmax(q k^T / sqrt(d)): its own scale (MLA's
    1 / sqrt(qk head) x yarn's mscale^2) and gpt-oss's sinks, one learned logit per query head
    that joins every row's denominator and adds nothing to its output."""

    scale: float | None = None
    sinks: torch.Tensor | None = None  # (H,) this rank's heads


PLAIN = Softmax()
