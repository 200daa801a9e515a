# No default finding (FR014): the same memo, warmed before the first
# compiled call (mujoco-torch f234fb3: `warm_all` called from make_data), so
# the compiled code finds the key and never writes; --unproven reports it,
# since the tool cannot prove the warming ran first. Measured (torch 2.13
# CPU): 1 graph over 3 calls.
import torch


class CachedConst:
    _instances = []

    def __init__(self, values, dtype=None):
        self._values = torch.tensor(values, dtype=dtype)
        self._cache = {}
        CachedConst._instances.append(self)

    def get(self, dtype, device):
        key = (dtype, str(device))
        t = self._cache.get(key)
        if t is None:
            t = self._values.to(dtype=dtype, device=device)
            self._cache[key] = t
        return t

    @classmethod
    def warm_all(cls, device, dtypes=(torch.float32,)):
        for inst in cls._instances:
            for dtype in dtypes:
                inst.get(dtype, device)


SIGNS = CachedConst([1.0, -1.0, -1.0, -1.0])


def step(q):
    return q * SIGNS.get(q.dtype, q.device)


CachedConst.warm_all(torch.device("cpu"))
compiled = torch.compile(torch.vmap(step))
total = 0.0
for i in range(3):
    total += float(compiled(torch.ones(5, 4) * i).sum())
print(total)
