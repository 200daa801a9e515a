"""A module global filled on first use inside compiled code (vllm-gaudi
before 86bb66e7: `_CACHED_FSDPA_OP` made by the attention function the
regionally compiled layers call): the first compiled call is guarded on
`G['_ROPE_TABLE'] is None` and fills it, so the next call compiles again.
The cure skips the global while compiling, a local standing in for it; the
table is a pure function of nothing (torch ops on constants), so the fix is
safe.  The attention function is reached through a registry, as
transformers' ALL_ATTENTION_FUNCTIONS, which no static reach follows."""
import torch

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


_ROPE_TABLE = None


def rotary_attention(query, key):
    global _ROPE_TABLE
    if _ROPE_TABLE is None:
        positions = torch.arange(8, dtype=torch.float32)
        _ROPE_TABLE = torch.cos(positions / 4.0)
    scores = (query * _ROPE_TABLE) @ (key * _ROPE_TABLE).transpose(-1, -2)
    return scores.softmax(dim=-1)


ATTENTION_FUNCTIONS = {"rotary": rotary_attention}


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):
        attention = ATTENTION_FUNCTIONS["rotary"]
        return self.proj(attention(x, x) @ x)


torch.manual_seed(0)
layers = torch.nn.ModuleList(Layer() for _ in range(3))
for i, layer in enumerate(layers):
    layers[i] = torch.compile(layer, backend=counting_backend)  # regional compilation

total = 0.0
with torch.no_grad():
    for _ in range(3):
        x = torch.randn(2, 4, 8)
        for layer in layers:
            x = layer(x)
        total += float(x.sum())
print(f"result: {total:.4f}")
print(f"graphs: {GRAPHS}")
