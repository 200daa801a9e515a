# realworld: positive fix=safe graphs=2
# Pattern: huggingface/diffusers before d94ad81b87 (#13792, "[AnyFlow] FAR:
# standalone causal-mask builder + torch.compile follow-up"),
# src/diffusers/models/transformers/transformer_anyflow.py:
# `AnyFlowRotaryPosEmbed._build_freqs` memoises its frequency table in
# `self._freqs_cache = (cache_key, freqs)`, and the rope module runs inside the
# compiled transformer (the test mixin's `torch.compile(model, fullgraph=True)`).
# dynamo guards `self._modules['rope']._freqs_cache is None`; the first call
# writes the tuple, so the second recompiles for the cache-hit branch.
# AnyFlowRotaryPosEmbed and get_1d_rotary_pos_embed (complex branch) verbatim;
# the transformer around them is a tiny stand-in.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 2
# graphs over 4 calls; with the memo skipped while compiling (diffusers' fix,
# FR014's fix (safe: the value is a pure function of the key)): 1 graph, the same output.
from typing import Any, Optional, Tuple

import torch
import torch.nn as nn

# diffusers/models/embeddings.py (use_real=False branch kept)
def get_1d_rotary_pos_embed(dim, pos, theta=10000.0, use_real=False, linear_factor=1.0, ntk_factor=1.0,
                            repeat_interleave_real=True, freqs_dtype=torch.float32):
    assert dim % 2 == 0
    if isinstance(pos, int):
        pos = torch.arange(pos)
    theta = theta * ntk_factor
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=freqs_dtype, device=pos.device) / dim)) / linear_factor
    freqs = torch.outer(pos, freqs)
    freqs_cis = torch.polar(torch.ones_like(freqs), freqs)
    return freqs_cis


class AnyFlowRotaryPosEmbed(nn.Module):
    def __init__(self, attention_head_dim: int, patch_size: Tuple[int, int, int], max_seq_len: int,
                 theta: float = 10000.0):
        super().__init__()
        self.attention_head_dim = attention_head_dim
        self.patch_size = patch_size
        self.max_seq_len = max_seq_len
        self.theta = theta
        self._freqs_cache: Optional[Tuple[Any, torch.Tensor]] = None

    def _build_freqs(self, device: torch.device) -> torch.Tensor:
        cache_key = (device.type, str(device))
        if self._freqs_cache is not None and self._freqs_cache[0] == cache_key:
            return self._freqs_cache[1]

        is_mps = device.type == "mps"
        is_npu = device.type == "npu"
        freqs_dtype = torch.float32 if (is_mps or is_npu) else torch.float64

        h_dim = w_dim = 2 * (self.attention_head_dim // 6)
        t_dim = self.attention_head_dim - h_dim - w_dim

        freqs_list = []
        for dim in (t_dim, h_dim, w_dim):
            f = get_1d_rotary_pos_embed(dim, self.max_seq_len, self.theta, use_real=False,
                                        repeat_interleave_real=False, freqs_dtype=freqs_dtype)
            freqs_list.append(f.to(device))
        freqs = torch.cat(freqs_list, dim=1)
        self._freqs_cache = (cache_key, freqs)  # expect: FR014
        return freqs

    def _forward_full_frame(self, num_frames, height, width, device) -> torch.Tensor:
        ppf, pph, ppw = num_frames, height, width
        freqs_full = self._build_freqs(device)
        if min(ppf, pph, ppw) <= 0:
            freq_channels = self.attention_head_dim // 2
            return torch.empty((ppf, pph, ppw, freq_channels), dtype=freqs_full.dtype, device=device)
        freqs = freqs_full.split_with_sizes(
            [self.attention_head_dim // 2 - 2 * (self.attention_head_dim // 6),
             self.attention_head_dim // 6, self.attention_head_dim // 6], dim=1)
        freqs_f = freqs[0][:ppf].view(ppf, 1, 1, -1).expand(ppf, pph, ppw, -1)
        freqs_h = freqs[1][:pph].view(1, pph, 1, -1).expand(ppf, pph, ppw, -1)
        freqs_w = freqs[2][:ppw].view(1, 1, ppw, -1).expand(ppf, pph, ppw, -1)
        return torch.cat([freqs_f, freqs_h, freqs_w], dim=-1)

    def forward(self, layout_cfg, device):
        freqs = self._forward_full_frame(num_frames=layout_cfg["total_frames"],
                                         height=layout_cfg["full_frame_shape"][0],
                                         width=layout_cfg["full_frame_shape"][1], device=device)
        freqs = freqs.flatten(start_dim=0, end_dim=2)
        freqs = freqs[None, None, ...]
        return {"query": freqs, "key": freqs}


def apply_rotary(x, freqs):  # x: [B, H, S, D] real, rotate pairs by complex freqs
    xc = torch.view_as_complex(x.to(torch.float64).unflatten(-1, (-1, 2)))
    return torch.view_as_real(xc * freqs).flatten(-2).to(x.dtype)


class TinyAnyFlowTransformer(nn.Module):
    """Stand-in for AnyFlowTransformer3DModel: patch-embed, rope, one attention-like mix."""

    def __init__(self, heads=2, head_dim=12, patch_size=(1, 2, 2), rope_max_seq_len=32):
        super().__init__()
        self.heads, self.head_dim = heads, head_dim
        self.proj_in = nn.Linear(4, heads * head_dim)
        self.rope = AnyFlowRotaryPosEmbed(head_dim, patch_size, rope_max_seq_len)
        self.proj_out = nn.Linear(heads * head_dim, 4)

    def forward(self, hidden_states, layout_cfg):
        b, s, _ = hidden_states.shape
        rotary_emb = self.rope(layout_cfg=layout_cfg, device=hidden_states.device)
        x = self.proj_in(hidden_states).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        q = apply_rotary(x, rotary_emb["query"])
        k = apply_rotary(x, rotary_emb["key"])
        attn = torch.softmax(q @ k.transpose(-1, -2) / self.head_dim ** 0.5, dim=-1) @ x
        return self.proj_out(attn.transpose(1, 2).reshape(b, s, -1))


torch.manual_seed(0)
model = TinyAnyFlowTransformer().eval()
# the test mixin: torch.compile(model, fullgraph=True), called repeatedly
model = torch.compile(model)  # fullgraph=True dropped: the probe's eager reference refuses it
layout_cfg = {"total_frames": 2, "full_frame_shape": (3, 3)}
out_sum = 0.0
with torch.no_grad():
    for step in range(4):
        hs = torch.randn(1, 2 * 3 * 3, 4)
        out_sum += model(hs, layout_cfg).sum().item()
print(f"OUT {out_sum:.4f}")
