# realworld: positive fix=safe graphs=2
# Pattern: karpathy/nanoGPT's two files (model.py `GPT.configure_optimizers`
# builds `torch.optim.AdamW(optim_groups, lr=learning_rate, ...)` and returns
# it; train.py imports GPT, gets `optimizer = model.configure_optimizers(...)`
# and sets `param_group['lr'] = lr` from `get_lr(it)` every iteration), with
# the optimizer step compiled as torch's compiled-optimizer tutorial does
# (issue 29 item 2). The cure spans both files: the project index proves that
# every module getting an optimizer from `GPT.configure_optimizers` writes its
# lr as a float that can become `.fill_` and passes a float lr, so FR004 makes
# `lr=torch.tensor(learning_rate)` in model.py and `.fill_(lr)` here, together
# (nanoGPT's own configure_optimizers adds `**extra_args` (`fused=True` on
# CUDA) to the constructor: there the lr cannot be seen, and FR004 reports).
# The one-file form is pos_optim_configure_optimizers.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 2
# graphs over 20 steps; FR004's fix in both files: 1, the same output.
import math
import torch

from model import GPT


def get_lr(it, warmup_iters=10, lr_decay_iters=100, learning_rate=6e-4, min_lr=6e-5):
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return min_lr + coeff * (learning_rate - min_lr)


torch.manual_seed(0)
model = GPT()
optimizer = model.configure_optimizers(0.1, 6e-4, (0.9, 0.95), "cpu")


@torch.compile
def opt_step():
    optimizer.step()


for it in range(20):
    lr = get_lr(it)
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr  # expect: FR004
    loss = model(torch.randn(4, 8))
    loss.backward()
    opt_step()
    optimizer.zero_grad()
print(f"OUT {float(model.lin.weight.detach().sum()):.6f}")
