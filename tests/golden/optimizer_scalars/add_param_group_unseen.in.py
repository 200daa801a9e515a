# A group added while training from a dict not visible here (`**extra` may
# hold a float lr): the loop's `.fill_` could meet it, so FR004 reports.
import torch

torch.manual_seed(0)
model = torch.nn.Linear(4, 4)
head = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)


@torch.compile
def step():
    opt.step()


x = torch.randn(8, 4)
extra = {"lr": 0.01}
for i in range(4):
    if i == 2:
        opt.add_param_group({"params": head.parameters(), **extra})
    for g in opt.param_groups:
        g["lr"] = 0.1 / (1 + i)
    head(model(x)).sum().backward()
    step()
    opt.zero_grad()
print("result:", round(model.weight.sum().item(), 5))
