"""A compiled layer reads an int a context object passed in holds (xtuner
before 567df4be: `seq_ctx.max_length`, the longest document of the pack):
the first pack compiles it as a constant, the next pack's new value fails
the guard `seq_ctx.max_length == 5` and recompiles with it symbolic
(2 graphs).  The cure, as for a plain int argument (OLMo-core 23a3af57):
name it in `torch.compiler.config.dynamic_sources`, by dynamo's own name
`L['seq_ctx'].max_length` (1 graph)."""
from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class SequenceContext:
    input_ids: torch.Tensor
    max_length: int


class DecoderLayer(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, hidden_states, seq_ctx: SequenceContext):
        scale = 1.0 / (seq_ctx.max_length + 1)
        return hidden_states + self.proj(hidden_states) * scale


torch.manual_seed(0)
embed = nn.Embedding(64, 8)
layer = DecoderLayer(8)
# backend="eager": dynamo guards (and recompiles) exactly as with inductor, in seconds
layer.compile(backend="eager")
total = 0.0
with torch.no_grad():
    for max_length in (5, 7, 6, 9):
        seq_ctx = SequenceContext(torch.arange(16).unsqueeze(0), max_length)
        total += float(layer(embed(seq_ctx.input_ids), seq_ctx).sum())
print(f"result: {total:.4f}")
