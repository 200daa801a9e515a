# golden: runtime
import torch
from torch import optim
from torch.optim.lr_scheduler import StepLR

torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = optim.SGD(model.parameters(), lr=torch.tensor(0.05), momentum=0.9)
sched = StepLR(opt, step_size=3, gamma=torch.tensor(0.5))
x = torch.randn(16, 4)
y = torch.randn(16, 1)


def update():
    opt.step()
    sched.step()


@torch.compile(fullgraph=False)
def train_step():
    update()


for _ in range(12):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    train_step()
print("final loss", round(loss.item(), 4))
