# golden: runtime
# Safe fix (FR014, the value proven a pure function of the key): mujoco-torch's _CachedConst before f234fb3, a plain
# object (not an nn.Module) that memoises a constant per (dtype, device) in a
# dict, read through `.get(key)` and filled on a miss, from a helper that the
# compiled function calls through torch.vmap. torch guards the key's absence;
# the write inside the compiled call makes the next call recompile. A local
# dict stands in for the memo, fresh while compiling. Measured (torch 2.13
# CPU): 2 graphs over 3 calls; 1 after the fix, the same output.
import torch


class CachedConst:
    def __init__(self, values, dtype=None):
        self._values = torch.tensor(values, dtype=dtype)
        self._cache = {}

    def get(self, dtype, device):
        key = (dtype, str(device))
        t = self._cache.get(key)
        if t is None:
            t = self._values.to(dtype=dtype, device=device)
            self._cache[key] = t
        return t


SIGNS = CachedConst([1.0, -1.0, -1.0, -1.0])


def conjugate(q):
    return q * SIGNS.get(q.dtype, q.device)


def step(q):
    return conjugate(q) * 2


compiled = torch.compile(torch.vmap(step))
total = 0.0
for i in range(3):
    total += float(compiled(torch.ones(5, 4) * i).sum())
print(total)
