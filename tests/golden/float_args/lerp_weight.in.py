# golden: runtime
# An EMA whose weight warms up: the float ends in `torch.lerp`, which takes a
# 0-d float64 weight with the same result for float32 tensors
# (codemods/tensor_ops_table.py): safe. `ema` is rebound to the compiled
# function's result (not visibly floating), `param` is: lerp's start and end
# share a dtype, so one is enough.
import torch


@torch.compile(dynamic=False)
def ema_update(ema, param, weight):
    return ema.lerp(param, weight)


torch.manual_seed(0)
ema = torch.zeros(4)
param = torch.randn(4)
for step in range(10):
    decay = min(0.999, (1 + step) / (10 + step))
    ema = ema_update(ema, param, 1.0 - decay)
    print(step, [round(v, 6) for v in ema.tolist()])
