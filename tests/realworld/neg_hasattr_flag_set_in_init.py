# realworld: negative graphs=1
# Pattern: vllm-project/vllm-ascend at cc9fa5488c (PR #2532), the fix:
# `AscendMLATorchairImpl.__init__` sets `self.running_in_graph = False`, so
# the attribute exists before the compiled decode step runs and the
# `hasattr` test is the same at every call. FR020 stays quiet.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 1
# graph over 4 decode calls.
import torch


class AscendMLATorchairImpl:
    def __init__(self, num_heads, head_size, scale):
        self.num_heads = num_heads
        self.head_size = head_size
        self.scale = float(scale)
        self.torchair_graph_enabled = True
        self.running_in_graph = False

    def _v_up_proj_and_o_proj(self, x):
        if hasattr(self, "running_in_graph") and not self.running_in_graph:
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
