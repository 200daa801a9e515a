# golden: runtime
import torch as th
from torch.optim import RMSprop as Opt
from torch.optim import lr_scheduler as ls

th.manual_seed(0)
model = th.nn.Linear(4, 1)
opt = Opt(model.parameters(), th.tensor(1e-2))
sched = ls.LinearLR(opt, th.tensor(0.5), th.tensor(1.0), total_iters=6)
x = th.randn(16, 4)
y = th.randn(16, 1)


@th.compile
def train_step():
    opt.step()
    sched.step()


for _ in range(12):
    opt.zero_grad()
    loss = th.nn.functional.mse_loss(model(x), y)
    loss.backward()
    train_step()
print("final loss", round(loss.item(), 4))
