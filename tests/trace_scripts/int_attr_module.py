"""int_attr_membership.py's test on an nn.Module's int attribute (FastVideo's
VSA impl as the real code owns it, in an nn.Module per block): specialised
at every block, 8 graphs and the limit.  FR005's flag makes it dynamic after
one recompile (3 graphs); named in `dynamic_sources` it is symbolic from the
first compile (2: one per outcome of the test; measured on 2.13)."""
from dataclasses import dataclass, field
from typing import List

import torch


@dataclass
class Metadata:
    dense_layers: List[int] = field(default_factory=lambda: [0, 5])
    sparsity: float = 0.5


class SparseImpl(torch.nn.Module):
    def __init__(self, prefix):
        super().__init__()
        self.layer_idx = int(prefix.split(".")[1])

    def forward(self, q, meta):
        keep = 0.0 if self.layer_idx in meta.dense_layers else meta.sparsity
        return torch.softmax(q, dim=-1) * (1.0 - keep)


torch.manual_seed(0)
impls = [SparseImpl(f"blocks.{i}.attn") for i in range(8)]
meta = Metadata()
total = 0.0
for impl in impls:
    # backend="eager": dynamo guards (and recompiles) exactly as with inductor, in seconds
    forward = torch.compile(impl.forward, backend="eager")
    total += float(forward(torch.randn(4, 8), meta).sum())
print(f"result: {total:.4f}")
