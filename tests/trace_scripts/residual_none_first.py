"""Decoder layers compiled one by one (regional compilation), the model's
loop passing `residual`, which is None for the first layer and a tensor
after it (vLLM's Qwen3-MoE model under vllm-gaudi before 7e7adbe6), with
prompts of two lengths.  The shape cure marks the tensors at the layer
call; `residual` may be None there (`residual = None` before the loop), and
a mark of None raises, so its mark goes under `if residual is not None:`."""
from typing import Optional

import torch

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


class RMSNorm(torch.nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(dim))

    def forward(self, x, residual=None):
        if residual is not None:
            x = x + residual
            residual = x
        out = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight
        return out if residual is None else (out, residual)


class DecoderLayer(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.input_layernorm = RMSNorm(dim)
        self.mlp = torch.nn.Linear(dim, dim)

    def forward(self, positions: torch.Tensor, hidden_states: torch.Tensor, residual: Optional[torch.Tensor]):
        if residual is None:
            residual = hidden_states
            hidden_states = self.input_layernorm(hidden_states)
        else:
            hidden_states, residual = self.input_layernorm(hidden_states, residual)
        hidden_states = self.mlp(hidden_states) + positions.unsqueeze(-1) * 0.01
        return hidden_states, residual


class Model(torch.nn.Module):
    def __init__(self, dim=8, layers=3):
        super().__init__()
        self.embed = torch.nn.Embedding(32, dim)
        self.layers = torch.nn.ModuleList(DecoderLayer(dim) for _ in range(layers))

    def forward(self, input_ids, positions):
        hidden_states = self.embed(input_ids)
        residual = None
        for layer in self.layers:
            hidden_states, residual = layer(positions, hidden_states, residual)
        return hidden_states + residual


torch.manual_seed(0)
model = Model()
for i, layer in enumerate(model.layers):
    model.layers[i] = torch.compile(layer, backend=counting_backend)  # regional compilation

total = 0.0
with torch.no_grad():
    for seq_len in (16, 16, 32, 32):
        input_ids = torch.randint(0, 32, (seq_len,))
        positions = torch.arange(seq_len)
        total += float(model(input_ids, positions).sum())
print(f"result: {total:.4f}")
print(f"graphs: {GRAPHS}")
