# Reported, no fix (FR016): a KV cache's Python int position, read and
# counted up inside the compiled decode step (nanochat's KVCache before
# 2bc521a). torch guards the position it read; each step sees another.
# Measured (torch 2.13 CPU): 2 graphs over 6 steps (the int turns dynamic
# after one recompile); under dynamic=False, 6.
import torch


class KVCache:
    def __init__(self, size):
        self.buf = torch.zeros(size)
        self.pos = 0

    def put(self, x):
        t1 = self.pos + x.numel()
        self.buf[self.pos:t1] = x
        self.pos = t1
        return self.buf[:t1]


@torch.compile
def decode_step(x, cache):
    return cache.put(x).sum()


cache = KVCache(16)
print([round(decode_step(torch.ones(1) * i, cache).item(), 2) for i in range(6)])
