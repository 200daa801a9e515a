import torch
import torch.nn.functional as F
from torch import nn

from kv_cache import KVCache


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.k_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.v_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.output_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.kv_cache = None

    def setup_cache(self, batch_size, max_seq_len):
        if self.kv_cache is not None:
            return
        self.kv_cache = KVCache(batch_size, max_seq_len, self.num_heads, self.head_dim)

    def reset_cache(self):
        if self.kv_cache is not None:
            self.kv_cache.reset()

    def forward(self, x, mask=None):
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.num_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.num_heads, self.head_dim).transpose(1, 2)
        if self.kv_cache is not None:
            k, v = self.kv_cache.update(k, v)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.output_proj(out.transpose(1, 2).reshape(b, s, -1))
