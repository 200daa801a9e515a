import torch
from torch import nn


class KVCache(nn.Module):
    """Keys and values of past tokens; the next position is kept in a buffer,
    so nothing about the module's Python attributes changes between calls."""

    def __init__(self, batch_size, max_seq_len, num_heads, head_dim):
        super().__init__()
        shape = (batch_size, num_heads, max_seq_len, head_dim)
        self.register_buffer("k_cache", torch.zeros(shape), persistent=False)
        self.register_buffer("v_cache", torch.zeros(shape), persistent=False)
        self.register_buffer("cache_pos", torch.arange(0, max_seq_len), persistent=False)
        self.batch_size = batch_size
        self.max_seq_len = max_seq_len

    def reset(self):
        self.k_cache.zero_()
        self.v_cache.zero_()
        self.cache_pos -= self.cache_pos[0].item()

    def update(self, k_val, v_val):
        seq_len = k_val.shape[2]
        if k_val.shape[0] > self.batch_size:
            raise ValueError("batch too large")
        self.k_cache[:, :, self.cache_pos[:seq_len]] = k_val
        self.v_cache[:, :, self.cache_pos[:seq_len]] = v_val
        self.cache_pos.add_(seq_len)
        return self.k_cache, self.v_cache
