# realworld: positive fix=safe graphs=2
# Pattern: compiled kernels kept in their own module (karpathy/nanochat
# nanochat/optim.py at 92d63d4e8bb4df75c3b71618f31ddde2378b2bcd; modded-nanogpt
# keeps them next to the optimizer) and called from the training script with
# float tensors and a float that changes every step. Issue 12: the fix is held
# back because the callee's operands are "not visibly floating", although
# every call site passes `torch.randn(...)` tensors: the dtype evidence is on
# the caller's side, in the other module.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 2
# graphs over 10 steps; hand-fixed (alpha as a float64 0-d tensor at the call):
# 1 graph, same output.
import torch

from kernels import scaled_add

torch.manual_seed(0)
x = torch.randn(4)
y = torch.randn(4)
for step in range(10):
    alpha = 0.1 * (1 + step) / 10
    x = scaled_add(x, y, alpha)  # expect: FR003
print([round(v, 4) for v in x.tolist()])
