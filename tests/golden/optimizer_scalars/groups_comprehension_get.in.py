# A comprehension over the param groups calling `.get` on each group: the
# lr may be read that way, so the fix is unsafe.
import torch

model = torch.nn.Linear(4, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1, weight_decay=0.01)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1)


@torch.compile
def step():
    opt.step()


for i in range(3):
    model(torch.randn(2, 4)).sum().backward()
    step()
    sched.step()
    wds = [g.get("weight_decay") for g in opt.param_groups]
print(wds)
