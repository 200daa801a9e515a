# OneTrainer @ 4a04e317 (PR #1563 branch, before 3fced711): fused-qkv LoRA adapters
# (modules/module/FusedModule.py, modules/module/LoRAModule.py), compiled transformer blocks
# (modules/util/checkpointing_util.py), prior-prediction step (BaseModelSetup.prior_model,
# GenericTrainer.train). Trimmed to a tiny CPU Flux-like block.
import functools
import math
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn import Dropout, Parameter

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


# ---------------------------------------------------------------- LoRAModule.py (trimmed)
class PeftBase(nn.Module):
    def __init__(self, prefix: str, orig_module: nn.Module | None):
        super().__init__()
        self.prefix = prefix + '.'
        self._orig_module = [orig_module] if orig_module else None
        self.is_applied = False
        self.layer_kwargs = {}
        self._initialized = False
        self.op = F.linear
        self.shape = (orig_module.out_features, orig_module.in_features)

    def check_initialized(self):
        if not self._initialized:
            raise RuntimeError(f"Module {self.prefix} is not initialized.")
        assert self.orig_forward is not None
        assert self.orig_module is not None
        assert self.op is not None

    @property
    def orig_module(self) -> nn.Module:
        assert self._orig_module is not None
        return self._orig_module[0]

    def create_layer(self):
        in_features = self.shape[1]
        out_features = self.shape[0]
        lora_down = nn.Linear(in_features, self.rank, bias=False)
        lora_up = nn.Linear(self.rank, out_features, bias=False)
        return lora_down, lora_up


class LoRAModule(PeftBase):
    def __init__(self, prefix: str, orig_module: nn.Module | None, rank: int, alpha: float):
        super().__init__(prefix, orig_module)
        self.rank = rank
        self.dropout = Dropout(0)
        self.register_buffer("alpha", torch.tensor(alpha))
        self.lora_down = None
        self.lora_up = None
        self.alpha.requires_grad_(False)

    def initialize_weights(self):
        self._initialized = True
        self.lora_down, self.lora_up = self.create_layer()
        nn.init.kaiming_uniform_(self.lora_down.weight, a=math.sqrt(5))
        # real code: nn.init.zeros_(self.lora_up.weight); small values so the adapter matters here
        nn.init.normal_(self.lora_up.weight, std=0.02)

    def forward(self, x, *args, **kwargs):
        self.check_initialized()
        ld = self.lora_up(self.dropout(self.lora_down(x)))
        return self.orig_forward(x) + ld * (self.alpha / self.rank)


# ---------------------------------------------------------------- FusedModule.py
class _FusedLinear(nn.Linear):
    def __init__(self, leaves: list[nn.Linear]):
        in_features = leaves[0].in_features
        out_features = sum(leaf.out_features for leaf in leaves)
        device = leaves[0].weight.device
        super().__init__(in_features, out_features, bias=False, device="meta")
        self._leaves = leaves
        # captured before the leaves are hooked, so forward never re-enters the per-leaf slicers.
        self._leaf_forwards = [leaf.forward for leaf in leaves]
        self.weight = Parameter(torch.empty(0, device=device), requires_grad=False)

    def reset_parameters(self):
        pass

    def forward(self, x, *args, **kwargs):
        return torch.cat([f(x) for f in self._leaf_forwards], dim=-1)


class FusedModuleGroup:
    def __init__(self, prefix: str, leaves: list[nn.Module], klass, additional_args: list, additional_kwargs: dict):
        self.leaves = leaves
        self.synthetic = _FusedLinear(leaves)
        self.module = klass(prefix, self.synthetic, *additional_args, **additional_kwargs)
        self.module.orig_forward = self.synthetic.forward
        self.module.is_applied = True
        self.prefix = self.module.prefix

        offsets = []
        start = 0
        for leaf in leaves:
            offsets.append((start, start + leaf.out_features))
            start += leaf.out_features
        self.slices = offsets

        self.is_applied = False

    def _leaf_forward(self, leaf_index: int, x, *args, **kwargs):
        start, end = self.slices[leaf_index]
        return self.module.forward(x)[..., start:end]

    def hook_to_module(self):
        if not self.is_applied:
            for leaf_index, leaf in enumerate(self.leaves):
                leaf.forward = functools.partial(self._leaf_forward, leaf_index)
            self.is_applied = True

    def remove_hook_from_module(self):
        if self.is_applied:
            for leaf, orig_forward in zip(self.leaves, self.synthetic._leaf_forwards, strict=True):
                leaf.forward = orig_forward
            self.is_applied = False

    def parameters(self) -> list[Parameter]:
        return list(self.module.parameters())


# ---------------------------------------------------------------- checkpointing_util.py (trimmed)
class CheckpointLayer(nn.Module):
    def __init__(self, orig_module: nn.Module, orig_forward, train_device: torch.device, checkpointing: bool = True):
        super().__init__()
        self.checkpoint = orig_module
        self.orig_forward = orig_forward
        self.checkpointing = checkpointing
        self.dummy = torch.zeros((1,), device=train_device, requires_grad=True)

    def __orig(self, *args, **kwargs):
        return self.orig_forward(*args, **kwargs) if self.checkpoint is None else self.checkpoint(*args, **kwargs)

    def __checkpointing_forward(self, dummy: torch.Tensor, *args, **kwargs):
        return self.__orig(*args, **kwargs)

    def forward(self, *args, **kwargs):
        if self.checkpointing and torch.is_grad_enabled():
            return torch.utils.checkpoint.checkpoint(
                self.__checkpointing_forward, self.dummy, *args, **kwargs, use_reentrant=False)
        else:
            return self.__orig(*args, **kwargs)


def create_checkpoint(orig_module: nn.Module, train_device: torch.device, checkpointing: bool = True,
                      compile: bool = False):
    if compile:
        layer = CheckpointLayer(orig_module=orig_module, orig_forward=None, train_device=train_device,
                                checkpointing=checkpointing)
        # do compile the checkpointing layer - slightly faster
        # layer.compile(fullgraph=True)
        layer.compile(backend=counting_backend, fullgraph=True)
        return layer


# ---------------------------------------------------------------- tiny Flux-like transformer
class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.to_q = nn.Linear(dim, dim)
        self.to_k = nn.Linear(dim, dim)
        self.to_v = nn.Linear(dim, dim)
        self.to_out = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, d = x.shape
        q = self.to_q(x).view(b, n, self.heads, -1).transpose(1, 2)
        k = self.to_k(x).view(b, n, self.heads, -1).transpose(1, 2)
        v = self.to_v(x).view(b, n, self.heads, -1).transpose(1, 2)
        o = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, d)
        return self.to_out(o)


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x):
        x = x + self.attn(self.norm(x))
        return x + self.mlp(x)


class Transformer(nn.Module):
    def __init__(self, dim=16, heads=2, depth=2):
        super().__init__()
        self.transformer_blocks = nn.ModuleList([Block(dim, heads) for _ in range(depth)])
        self.proj_out = nn.Linear(dim, dim)

    def forward(self, x):
        for block in self.transformer_blocks:
            x = block(x)
        return self.proj_out(x)


class Model:
    def __init__(self):
        self.transformer = Transformer()
        self.transformer.requires_grad_(False)
        # LoRAModuleWrapper with a fused output format (ORIGINAL/COMFY): one fused qkv adapter per block
        self.groups = []
        for i, block in enumerate(self.transformer.transformer_blocks):
            attn = block.attn
            group = FusedModuleGroup(f"transformer.transformer_blocks.{i}.attn.qkv",
                                     [attn.to_q, attn.to_k, attn.to_v], LoRAModule, [4, 4.0], {})
            group.module.initialize_weights()
            self.groups.append(group)
        for group in self.groups:
            group.hook_to_module()
        # enable_checkpointing(..., compile=True): every transformer block is wrapped and compiled
        blocks = self.transformer.transformer_blocks
        for i in range(len(blocks)):
            blocks[i] = create_checkpoint(blocks[i], torch.device("cpu"), checkpointing=True, compile=True)

    def adapters(self):
        return self.groups

    def parameters(self):
        return [p for g in self.groups for p in g.parameters()]


# ---------------------------------------------------------------- BaseModelSetup / GenericTrainer
@contextmanager
def prior_model(model: Model):
    for adapter in model.adapters():
        adapter.remove_hook_from_module()
    try:
        yield
    finally:
        for adapter in model.adapters():
            adapter.hook_to_module()


def predict(model: Model, batch):
    return model.transformer(batch["latent"])


def main():
    torch.manual_seed(0)
    model = Model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for step in range(3):
        batch = {"latent": torch.randn(2, 8, 16), "target": torch.randn(2, 8, 16),
                 "concept_type": ["STANDARD", "PRIOR_PREDICTION"]}
        prior_pred_indices = [i for i in range(2) if batch["concept_type"][i] == "PRIOR_PREDICTION"]
        if len(prior_pred_indices) > 0:
            with prior_model(model), torch.no_grad():
                prior_model_prediction = predict(model, batch)
            predicted = predict(model, batch)
            target = batch["target"].clone()
            target[prior_pred_indices] = prior_model_prediction[prior_pred_indices]
        else:
            predicted = predict(model, batch)
            target = batch["target"]
        loss = F.mse_loss(predicted, target)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    checksum = sum(losses) + sum(p.detach().sum().item() for p in model.parameters())
    print(f"GRAPHS {GRAPHS}")
    print(f"OUT {checksum:.4f}")


if __name__ == "__main__":
    main()
