# realworld: positive fix=safe graphs=2
# Pattern: optimizer classes configured with `functools.partial` before the
# parameters exist (pytorch/torchtitan builds optimizers through a factory,
# torchtitan/components/optimizer/optimizer.py at
# b5bcd76c66d0acb1a08b176d9639425bc55e0b2a; many training repos bind
# `partial(torch.optim.AdamW, betas=..., weight_decay=...)` in their config):
# the optimizer is stepped inside a compiled function while a scheduler changes
# its float lr every step.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 2
# graphs over 12 steps; hand-fixed (`lr=torch.tensor(0.01)`): 1, same output.
import functools

import torch

OptimCls = functools.partial(torch.optim.AdamW, betas=(0.9, 0.95), weight_decay=0.0)

torch.manual_seed(0)
model = torch.nn.Linear(4, 4)
opt = OptimCls(model.parameters(), lr=0.01)  # expect: FR004
sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9)


@torch.compile(backend="eager")
def opt_step():
    opt.step()


x = torch.randn(8, 4)
for step in range(12):
    model(x).pow(2).mean().backward()
    opt_step()
    opt.zero_grad()
    sched.step()
print(round(model.weight.sum().item(), 4))
