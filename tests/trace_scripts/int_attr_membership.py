"""A per-block int attribute of a plain object tested against a list inside a
forward every block shares (FastVideo's MiniMax-H3 VSA impl before 3792707:
`0.0 if self.layer_idx in attn_metadata.dense_layers else sparsity`).  The
first block's index is specialised; automatic dynamic then makes it a
SymInt, and the membership test guards `not (self.layer_idx == 0 or
self.layer_idx == 5)`: one graph for layer 0, one for the others, one for
layer 5: 3 graphs.  Named in `dynamic_sources` the index is symbolic from
the first compile: one graph per outcome of the test, 2 (measured on 2.13)."""
from dataclasses import dataclass, field
from typing import List

import torch


@dataclass
class Metadata:
    dense_layers: List[int] = field(default_factory=lambda: [0, 5])
    sparsity: float = 0.5


class SparseImpl:
    def __init__(self, prefix):
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
