# A helper writes a float into groups it is given as a slice
# (`warm(opt.param_groups[:1], v)`, a form FR004 does not follow), after the
# loop's write. Made a tensor and `.fill_`, the loop's next write would meet
# the helper's float and crash ('float' object has no attribute 'fill_'), as
# it did before the fix of this case. Reported, no fix, no change.
import torch

model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.05)


@torch.compile(backend="eager")
def train_step():
    opt.step()


def warm(groups, v):
    for g in groups:
        g["lr"] = v


for i in range(6):
    for group in opt.param_groups:
        group["lr"] = 0.05 / (1 + i)
    if i == 0:
        warm(opt.param_groups[:1], 0.01)
    opt.zero_grad()
    model(torch.randn(2, 4)).sum().backward()
    train_step()
print("ok")
