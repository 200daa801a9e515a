"""A compile of `self.__call__` in a mixin (transformers' GenerationMixin.
get_compiled_call, dynamic=False), the compiled code the forward of a
module class deriving from it, fed a mask one column longer each step."""
import torch
from torch import nn


class GenerationMixin:
    def get_compiled_call(self):
        if not hasattr(self, "_compiled_call"):
            # backend="eager": dynamo guards (and recompiles) exactly as with inductor, in seconds
            self._compiled_call = torch.compile(self.__call__, backend="eager", fullgraph=True, dynamic=False)
        return self._compiled_call

    def generate(self, x, steps):
        mask = torch.ones(x.shape[0], 1)
        out = []
        for _ in range(steps):
            out.append(self.get_compiled_call()(x, mask))
            mask = torch.cat([mask, torch.ones(x.shape[0], 1)], dim=-1)
        return out


class TinyLM(nn.Module, GenerationMixin):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x, attention_mask):
        return self.proj(x) * attention_mask.sum(-1, keepdim=True)


torch.manual_seed(0)
model = TinyLM().eval()
torch.set_grad_enabled(False)
outs = model.generate(torch.randn(2, 4), 6)
print("result:", round(float(torch.stack(outs).sum()), 4))
