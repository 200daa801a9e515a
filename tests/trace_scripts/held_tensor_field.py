"""A compiled decoder layer reads the document boundaries of a packed batch
from a context object passed in (xtuner before ea57efb8:
`seq_ctx.cu_seq_lens_q`, one entry per packed document plus one): the
number of documents changes from batch to batch, so the second batch
recompiles on `seq_ctx.cu_seq_lens_q` (2 graphs).  The cure, the project's
own: mark that tensor's dim 0 dynamic before the call, through the object
(`maybe_mark_dynamic(seq_ctx.cu_seq_lens_q, 0)`: 1 graph)."""
from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class SequenceContext:
    input_ids: torch.Tensor
    cu_seq_lens_q: torch.Tensor

    @classmethod
    def from_lengths(cls, lengths):
        cu = torch.cumsum(torch.tensor([0] + lengths), 0)
        return cls(torch.arange(int(cu[-1])).unsqueeze(0), cu)


class DecoderLayer(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, hidden_states, seq_ctx: SequenceContext):
        starts = torch.zeros(hidden_states.shape[1], dtype=torch.long)
        starts[seq_ctx.cu_seq_lens_q[1:-1]] = 1
        doc_ids = torch.cumsum(starts, 0)
        return hidden_states + self.proj(hidden_states) * doc_ids.unsqueeze(-1)


class Model(nn.Module):
    def __init__(self, dim, n_layers):
        super().__init__()
        self.embed = nn.Embedding(64, dim)
        self.layers = nn.ModuleList([DecoderLayer(dim) for _ in range(n_layers)])

    def forward(self, seq_ctx: SequenceContext):
        hidden_states = self.embed(seq_ctx.input_ids)
        for decoder_layer in self.layers:
            hidden_states = decoder_layer(hidden_states, seq_ctx)
        return hidden_states


torch.manual_seed(0)
model = Model(8, 2)
for layer in model.layers:
    # backend="eager": dynamo guards (and recompiles) exactly as with inductor, in seconds
    layer.compile(backend="eager")
total = 0.0
with torch.no_grad():
    for lengths in ([5, 6, 5], [4, 4, 4, 4], [3, 5, 4, 2, 2]):  # always 16 tokens, 3, 4, 5 documents
        total += float(model(SequenceContext.from_lengths(lengths)).sum())
print(f"result: {total:.4f}")
