# realworld: positive fix=unsafe graphs=2
# Pattern: vllm-project/vllm-ascend before cc9fa5488c (PR #2532,
# vllm_ascend/torchair/torchair_mla.py): `AscendMLATorchairImpl`, a plain
# object each attention layer holds (`Attention(impl)`), sets
# `self.running_in_graph` only in its `forward`, which the compiled decode
# step runs, and `_v_up_proj_and_o_proj` tests `if hasattr(self,
# "running_in_graph") and not self.running_in_graph`. The first graph is
# guarded on `not hasattr(impl, 'running_in_graph')`; the call creates it,
# the next call compiles again. FR020 reports it and offers the default in
# `__init__` that reads the same for this file's readers (True; the project
# wrote False), unsafe: other modules are not seen (`run --fix` checks them).
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 2
# graphs over 4 decode calls; with the default: 1, the same output.
import torch


class AscendMLATorchairImpl:
    def __init__(self, num_heads, head_size, scale):
        self.num_heads = num_heads
        self.head_size = head_size
        self.scale = float(scale)
        self.torchair_graph_enabled = True

    def _v_up_proj_and_o_proj(self, x):
        if hasattr(self, "running_in_graph") and not self.running_in_graph:  # expect: FR020
            return x.view(-1, self.num_heads * self.head_size)
        return x.reshape(-1, self.num_heads * self.head_size) * self.scale

    def forward(self, layer, hidden_states, decode):
        self.running_in_graph = self.torchair_graph_enabled and decode
        x = layer.q_proj(hidden_states).view(-1, self.num_heads, self.head_size)
        return self._v_up_proj_and_o_proj(x.softmax(-1))


class Attention(torch.nn.Module):
    def __init__(self, impl):
        super().__init__()
        self.impl = impl


class TorchairDeepseekV2MLAAttention(torch.nn.Module):
    def __init__(self, hidden=16, num_heads=2):
        super().__init__()
        self.q_proj = torch.nn.Linear(hidden, hidden)
        impl = AscendMLATorchairImpl(num_heads, hidden // num_heads, 0.5)
        self.mla_attn = Attention(impl)

    def forward(self, hidden_states):
        return self.mla_attn.impl.forward(self, hidden_states, True)


class TorchairDeepseekV2Model(torch.nn.Module):
    def __init__(self, num_layers=2):
        super().__init__()
        self.layers = torch.nn.ModuleList(TorchairDeepseekV2MLAAttention() for _ in range(num_layers))

    def forward(self, hidden_states):
        for layer in self.layers:
            hidden_states = hidden_states + layer(hidden_states)
        return hidden_states


torch.manual_seed(0)
model = TorchairDeepseekV2Model().eval()
compiled_model = torch.compile(model, dynamic=True)
out = 0.0
with torch.no_grad():
    for bs in (5, 7, 5, 7):
        out += float(compiled_model(torch.randn(bs, 16)).sum())
print(round(out, 4))
