import torch
from torch import nn


class KVCache(nn.Module):
    """Keys and values of past tokens; ``size`` counts the positions filled."""

    def __init__(self, batch_size, max_seq_len, num_heads, head_dim):
        super().__init__()
        shape = (batch_size, num_heads, max_seq_len, head_dim)
        self.register_buffer("k_cache", torch.zeros(shape), persistent=False)
        self.register_buffer("v_cache", torch.zeros(shape), persistent=False)
        self.size = 0

    def reset(self):
        self.k_cache.zero_()
        self.v_cache.zero_()
        self.size = 0

    def update(self, k_val, v_val):
        seq_len = k_val.shape[2]
        if self.size + seq_len > self.k_cache.shape[2]:
            raise ValueError("cache full")
        cache_pos = torch.arange(self.size, self.size + seq_len, device=k_val.device)
        self.size += seq_len
        self.k_cache[:, :, cache_pos] = k_val
        self.v_cache[:, :, cache_pos] = v_val
        return self.k_cache, self.v_cache
