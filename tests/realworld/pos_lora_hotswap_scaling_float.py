# realworld: positive fix=unsafe graphs=2
# Pattern: huggingface/peft LoRA hot-swapping, eaab05e18d51fb4cce20a73c9acd82a00c013b83
# (PR #2177, "Hotswap allow different alpha scalings and ranks",
# src/peft/utils/hotswap.py and src/peft/tuners/lora/layer.py): every LoRA
# layer keeps `self.scaling[adapter] = lora_alpha / r`, a Python float that
# `Linear.forward` multiplies by; hot-swapping an adapter with another
# lora_alpha writes a new float from eager code (`_update_scaling`:
# `lora_module.scaling[adapter_name] = scaling`), so the compiled model's
# guard on it (`...q_proj.scaling['default'] == 1.0`) fails. This is #2177's
# float path (without `prepare_model_for_compiled_hotswap`); the project's fix
# makes every scaling a 0-d tensor before compiling, which `_update_scaling`
# then `.fill_()`s (tests/realworld/neg_lora_hotswap_scaling_tensor.py).
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 2
# graphs over 1 + 9 hot-swaps (the float turns dynamic after its first
# change); FR018's unsafe fix (every write `torch.as_tensor(...)`): 1.
import math
from operator import attrgetter
from typing import Any

import torch
import torch.nn as nn

PREPARE = False

class LoraLayer:
    def __init__(self, base_layer):
        self.base_layer = base_layer
        self.r, self.lora_alpha, self.scaling = {}, {}, {}
        self.lora_dropout = nn.ModuleDict({})
        self.lora_A = nn.ModuleDict({})
        self.lora_B = nn.ModuleDict({})
        self.use_dora = {}
        self.active_adapters = ["default"]
        self.weight = base_layer.weight

    def update_layer(self, adapter_name, r, lora_alpha, use_rslora=False):
        self.r[adapter_name] = r
        self.lora_alpha[adapter_name] = lora_alpha
        self.lora_dropout[adapter_name] = nn.Identity()
        self.lora_A[adapter_name] = nn.Linear(self.base_layer.in_features, r, bias=False)
        self.lora_B[adapter_name] = nn.Linear(r, self.base_layer.out_features, bias=False)
        nn.init.normal_(self.lora_B[adapter_name].weight)  # init_lora_weights=False in the tests
        self.scaling[adapter_name] = lora_alpha / math.sqrt(r) if use_rslora else lora_alpha / r
        self.use_dora[adapter_name] = False


class Linear(nn.Module, LoraLayer):
    def __init__(self, base_layer, adapter_name, r, lora_alpha):
        super().__init__()
        LoraLayer.__init__(self, base_layer)
        self.update_layer(adapter_name, r, lora_alpha)

    def forward(self, x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        result = self.base_layer(x, *args, **kwargs)
        torch_result_dtype = result.dtype
        for active_adapter in self.active_adapters:
            if active_adapter not in self.lora_A.keys():
                continue
            lora_A = self.lora_A[active_adapter]
            lora_B = self.lora_B[active_adapter]
            dropout = self.lora_dropout[active_adapter]
            scaling = self.scaling[active_adapter]
            if not self.use_dora[active_adapter]:
                result = result + lora_B(lora_A(dropout(x))) * scaling
        result = result.to(torch_result_dtype)
        return result


class TinyOPTAttention(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(d, d) for _ in range(4))

    def forward(self, h):
        q, k, v = self.q_proj(h), self.k_proj(h), self.v_proj(h)
        return self.out_proj(torch.softmax(q @ k.transpose(-1, -2) / 4.0, -1) @ v)


class TinyOPT(nn.Module):
    def __init__(self, d=16, layers=2):
        super().__init__()
        self.layers = nn.ModuleList([TinyOPTAttention(d) for _ in range(layers)])

    def forward(self, h):
        for layer in self.layers:
            h = h + layer(h)
        return h


def get_peft_model(model, r, lora_alpha, target_modules=("q_proj", "v_proj")):
    for layer in model.layers:
        for name in target_modules:
            setattr(layer, name, Linear(getattr(layer, name), "default", r, lora_alpha))
    return model


# --- peft/utils/hotswap.py (eaab05e18) ---
def _update_scaling(lora_module, adapter_name, scaling=None):
    if lora_module.scaling[adapter_name] == scaling:
        return
    if isinstance(lora_module.scaling[adapter_name], torch.Tensor):
        lora_module.scaling[adapter_name].fill_(scaling)
    elif isinstance(lora_module.scaling[adapter_name], (float, int)):
        lora_module.scaling[adapter_name] = scaling  # expect: FR018
    else:
        raise ValueError("unexpected scaling type")


def _convert_scalings_to_tensor(model):
    for module in model.modules():
        if not isinstance(module, LoraLayer):
            continue
        scaling = module.scaling
        for key, val in scaling.items():
            if isinstance(val, float):
                scaling[key] = torch.tensor(val, device=module.weight.device)
            elif not isinstance(val, torch.Tensor):
                raise ValueError("expected float scalings")


def prepare_model_for_compiled_hotswap(model, *, target_rank=None, config=None):
    if hasattr(model, "_orig_mod"):
        raise ValueError("Call prepare_model_for_compiled_hotswap *before* compiling the model")
    _convert_scalings_to_tensor(model)


def hotswap_adapter_from_state_dict(model, state_dict, adapter_name, r, lora_alpha, use_rslora=False):
    for key, new_val in state_dict.items():
        module_name = ".".join(key.split(".")[:-3])
        module = model.get_submodule(module_name)
        scaling = lora_alpha / math.sqrt(r) if use_rslora else lora_alpha / r
        _update_scaling(module, adapter_name=adapter_name, scaling=scaling)
        old_val = attrgetter(key)(model)
        old_val.data = new_val.data  # compiled model: no swap_tensors


torch.manual_seed(0)
model = get_peft_model(TinyOPT(), r=8, lora_alpha=8)
if PREPARE:
    prepare_model_for_compiled_hotswap(model)
inner = model
model = torch.compile(model)

x = torch.randn(2, 5, 16)
out = 0.0
with torch.no_grad():
    out += model(x).sum().item()
    # hot-swap a series of adapters of the same rank but other lora_alpha values
    for i, alpha in enumerate([16, 4, 32, 12, 24, 6, 20, 10, 28]):
        g = torch.Generator().manual_seed(100 + i)  # stands for load_peft_weights(path_adapter_i)
        sd = {k: torch.randn(v.shape, generator=g) * 0.1 for k, v in inner.state_dict().items() if "lora_" in k}
        hotswap_adapter_from_state_dict(inner, sd, "default", r=8, lora_alpha=alpha)
        out += model(x).sum().item()
print(f"OUT {out:.4f}")
