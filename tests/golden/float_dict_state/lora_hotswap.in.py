# golden: --unsafe-fixes runtime
# Unsafe fix (FR018): peft's LoRA hot-swap before #2177's
# prepare_model_for_compiled_hotswap (huggingface/peft eaab05e18): each layer
# keeps `self.scaling[adapter] = lora_alpha / r`, a Python float its forward
# multiplies by, and `_update_scaling` writes a new one from eager code when
# an adapter of another lora_alpha is swapped in. torch guarded the float
# (`...scaling['default'] == 1.0`): 2 graphs over four calls (torch 2.13 CPU);
# with every write a 0-d tensor, 1 graph and the same output.
import torch
import torch.nn as nn


class LoraLinear(nn.Module):
    def __init__(self, base_layer, r, lora_alpha):
        super().__init__()
        self.base_layer = base_layer
        self.scaling = {}
        self.lora_A = nn.ModuleDict({})
        self.lora_B = nn.ModuleDict({})
        self.active_adapters = ["default"]
        self.update_layer("default", r, lora_alpha)

    def update_layer(self, adapter_name, r, lora_alpha):
        self.lora_A[adapter_name] = nn.Linear(self.base_layer.in_features, r, bias=False)
        self.lora_B[adapter_name] = nn.Linear(r, self.base_layer.out_features, bias=False)
        nn.init.normal_(self.lora_B[adapter_name].weight)
        self.scaling[adapter_name] = lora_alpha / r

    def forward(self, x):
        result = self.base_layer(x)
        for active_adapter in self.active_adapters:
            scaling = self.scaling[active_adapter]
            result = result + self.lora_B[active_adapter](self.lora_A[active_adapter](x)) * scaling
        return result


class Block(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.q_proj = LoraLinear(nn.Linear(d, d), r=8, lora_alpha=8)
        self.out_proj = nn.Linear(d, d)

    def forward(self, h):
        return self.out_proj(torch.tanh(self.q_proj(h)))


def _update_scaling(lora_module, adapter_name, scaling=None):
    if lora_module.scaling[adapter_name] == scaling:
        return
    if isinstance(lora_module.scaling[adapter_name], torch.Tensor):
        lora_module.scaling[adapter_name].fill_(scaling)
    else:
        lora_module.scaling[adapter_name] = scaling


def hotswap_adapter(model, lora_alpha, r=8):
    for module in model.modules():
        if isinstance(module, LoraLinear):
            _update_scaling(module, "default", scaling=lora_alpha / r)


torch.manual_seed(0)
inner = Block()
model = torch.compile(inner)
x = torch.randn(2, 5, 16)
total = 0.0
with torch.no_grad():
    total += model(x).sum().item()
    for alpha in [16, 4, 32]:
        hotswap_adapter(inner, alpha)
        total += model(x).sum().item()
print(f"{total:.4f}")
