"""A compiled layer reads two ints a context object passed in holds, which
change together (xtuner before 567df4be: `seq_ctx.max_length_q` and
`seq_ctx.max_length_k`, the longest query and key document of the pack).
The next pack fails the guard on one of them first (`seq_ctx.max_length_k
== 11`) and recompiles with both symbolic (2 graphs); the trace names only
the first.  Naming that one alone in `torch.compiler.config.dynamic_sources`
leaves 2 graphs (the other fails next); naming both, the one the recompile
made symbolic too, gives 1."""
from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class SequenceContext:
    input_ids: torch.Tensor
    cu_seq_lens: torch.Tensor
    max_length_q: int
    max_length_k: int

    @classmethod
    def from_input_ids(cls, input_ids, lengths):
        cu_seq_lens = torch.cumsum(torch.tensor([0] + lengths), 0)
        longest = (cu_seq_lens[1:] - cu_seq_lens[:-1]).max().item()
        return cls(input_ids, cu_seq_lens, longest, longest)


class DecoderLayer(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, hidden_states, seq_ctx: SequenceContext):
        assert isinstance(seq_ctx.max_length_k, int) and isinstance(seq_ctx.max_length_q, int)
        scale = 1.0 / (seq_ctx.max_length_q * seq_ctx.max_length_k)
        return hidden_states + self.proj(hidden_states) * scale


torch.manual_seed(0)
embed = nn.Embedding(64, 8)
layer = DecoderLayer(8)
# backend="eager": dynamo guards (and recompiles) exactly as with inductor, in seconds
layer.compile(backend="eager")
total = 0.0
with torch.no_grad():
    for lengths in ([5, 11], [6, 10], [9, 7], [16]):
        seq_ctx = SequenceContext.from_input_ids(torch.arange(16).unsqueeze(0), lengths)
        total += float(layer(embed(seq_ctx.input_ids), seq_ctx).sum())
print(f"result: {total:.4f}")
