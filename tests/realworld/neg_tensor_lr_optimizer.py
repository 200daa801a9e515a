# realworld: negative graphs=1
# Pattern: the documented cure already applied (PyTorch's "compiling the
# optimizer with an LR scheduler" recipe; pytorch/ao asks for
# `optim.param_groups[0]['lr'].fill_(new_lr)`): the lr is a 0-d tensor from
# the start and the scheduler keeps it a tensor, so stepping inside a compiled
# function does not recompile per lr value.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 1
# graph over 12 steps while ExponentialLR changes the lr.
import torch

torch.manual_seed(0)
model = torch.nn.Linear(4, 4)
opt = torch.optim.Adam(model.parameters(), lr=torch.tensor(0.01))
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
