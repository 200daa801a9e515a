"""A transformer whose forward a decorator wraps in `wrapper(self, *args,
**kwargs)` (diffusers' apply_lora_scale), compiled by replacing the forward
of a module fetched with getattr (xDiT's `_compile_model`:
`transformer.forward = torch.compile(transformer.forward)`), called as a
module with `timestep=` of size 1 at the first denoising step and 2 after
(xDiT PR #781): size 1 is specialised even under dynamic shapes, so the
second step recompiles (2 graphs); `mark_unbacked` on the tensor passed: 1."""
import functools

import torch
from torch import nn


def apply_lora_scale(kwargs_name="joint_attention_kwargs"):
    def decorator(forward_fn):
        @functools.wraps(forward_fn)
        def wrapper(self, *args, **kwargs):
            kwargs.pop(kwargs_name, None)
            return forward_fn(self, *args, **kwargs)

        return wrapper

    return decorator


class Transformer(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.time_proj = nn.Linear(1, dim)

    @apply_lora_scale("attention_kwargs")
    def forward(self, hidden_states, timestep, timestep_indices, attention_kwargs=None):
        temb = self.time_proj(timestep[:, None])
        return self.proj(hidden_states) + temb.index_select(0, timestep_indices)[None]


class Pipeline:
    def __init__(self, transformer):
        self.transformer = transformer

    def __call__(self, latents, steps):
        transformer = self.transformer
        total = 0.0
        for i in range(steps):
            # the distinct timesteps of the packed rows: one at the first step, two after
            unique_timesteps = torch.tensor([1.0 - i / steps] if i == 0 else [1.0 - i / steps, 0.5])
            timestep_indices = torch.zeros(latents.shape[1], dtype=torch.long) if i == 0 else torch.arange(latents.shape[1]) % 2
            out = transformer(
                hidden_states=latents,
                timestep=unique_timesteps,
                timestep_indices=timestep_indices,
                attention_kwargs=None,
            )
            total += float(out.sum())
        return total


torch.manual_seed(0)
pipe = Pipeline(Transformer())
transformer = getattr(pipe, "transformer")
transformer.forward = torch.compile(transformer.forward, backend="eager", fullgraph=True)
with torch.no_grad():
    total = pipe(torch.randn(1, 6, 8), 3) + pipe(torch.randn(1, 6, 8), 3)
print("result:", round(total, 4))
