# the optimizer is stepped eagerly: only the model is compiled; left alone
import torch

model = torch.nn.Linear(4, 1)
opt = torch.optim.Adam(model.parameters(), lr=0.01)
sched = torch.optim.lr_scheduler.ExponentialLR(opt, 0.9)


@torch.compile
def forward(x):
    return model(x)


for _ in range(3):
    opt.zero_grad()
    forward(torch.randn(2, 4)).sum().backward()
    opt.step()
    sched.step()
