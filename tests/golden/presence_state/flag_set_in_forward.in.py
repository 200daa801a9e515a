# golden: --unsafe-fixes
# golden: runtime
# vllm-ascend before cc9fa548: the impl a layer holds sets `running_in_graph`
# in its compiled forward and tests it with hasattr: one recompile.
import torch


class Impl:
    def __init__(self, scale):
        """Attention math the layer delegates to."""
        self.scale = scale

    def _project(self, x):
        if hasattr(self, "running_in_graph") and not self.running_in_graph:
            return x * 2.0
        return x * self.scale

    def forward(self, x, decode):
        self.running_in_graph = decode
        return self._project(x) + 1.0


class Attention(torch.nn.Module):
    def __init__(self, impl):
        super().__init__()
        self.impl = impl


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)
        self.attn = Attention(Impl(0.5))

    def forward(self, x):
        return self.attn.impl.forward(self.linear(x), True)


torch.manual_seed(0)
model = torch.compile(Layer())
with torch.no_grad():
    out = sum(float(model(torch.randn(3, 8)).sum()) for _ in range(4))
print(round(out, 4))
