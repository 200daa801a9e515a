# A comprehension over the param groups that reads another key
# (`[g["weight_decay"] for g in opt.param_groups]`): no lr read, the fix
# stays safe (the analysis of group uses once failed on a comprehension).
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
    wds = [g["weight_decay"] for g in opt.param_groups]
print(wds)
