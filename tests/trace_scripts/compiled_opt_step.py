# The optimizer's own step compiled (`opt.step = torch.compile(opt.step)`, as
# DeepSpeed's PR #7633 describes its users doing) with a float lr that a
# warmup writes into the param groups: the compiled step recompiles on the
# lr.  The cure is FR004's (a tensor lr, the writes `.fill_`), matched to
# torch's step although the finding is on the constructor, not on the
# compile call.
import torch

torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.0)
opt.step = torch.compile(opt.step, backend="eager")
x = torch.randn(16, 8)
for i in range(6):
    for group in opt.param_groups:
        group["lr"] = 0.01 * min(1.0, (i + 1) / 4)
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), x[:, :1]).backward()
    opt.step()
print("result:", round(sum(p.sum().item() for p in model.parameters()), 5))
