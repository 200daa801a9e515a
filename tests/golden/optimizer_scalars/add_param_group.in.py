# golden: runtime
# A group added while training (a head unfrozen at step 2: Lightning's
# BaseFinetuning.unfreeze_and_add_param_group) with its own float lr: its lr
# becomes a tensor too, or the loop's `.fill_` would crash on it.
import torch

torch.manual_seed(0)
model = torch.nn.Linear(4, 4)
head = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)


@torch.compile
def step():
    opt.step()


x = torch.randn(8, 4)
for i in range(4):
    if i == 2:
        opt.add_param_group({"params": head.parameters(), "lr": 0.01})
    for g in opt.param_groups:
        g["lr"] = 0.1 / (1 + i)
    head(model(x)).sum().backward()
    step()
    opt.zero_grad()
print("result:", round(model.weight.sum().item(), 5))
