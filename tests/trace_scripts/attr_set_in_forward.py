"""A flag first assigned by the compiled forward of a plain object (not an
nn.Module) and read through `hasattr` (vllm-ascend cc9fa548,
`AscendMLATorchairImpl.running_in_graph`): the first graph is guarded on
`not hasattr(impl, 'running_in_graph')`, which the call itself makes false,
so the next call compiles again.  The cure: a default in `__init__` whose
readers give what they gave for the missing attribute (here `True`:
`hasattr(self, "running_in_graph") and not self.running_in_graph` is False
either way)."""
import torch

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


class Impl:
    def __init__(self, scale):
        self.scale = scale

    def _project(self, x):
        if hasattr(self, "running_in_graph") and not self.running_in_graph:
            return x * 2.0
        return x * self.scale

    def forward(self, x, decode):
        self.running_in_graph = decode
        return self._project(x) + 1.0


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)
        self.impl = Impl(0.5)

    def forward(self, x):
        return self.impl.forward(self.linear(x), True)


torch.manual_seed(0)
model = Layer()
compiled = torch.compile(model, backend=counting_backend)
total = 0.0
with torch.no_grad():
    for _ in range(4):
        total += float(compiled(torch.randn(3, 8)).sum())
print("graphs:", GRAPHS)
print("result:", round(total, 4))
