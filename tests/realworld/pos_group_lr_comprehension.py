# realworld: positive fix=safe graphs=2
# Pattern: issue 12, form 1 (`[m * group["lr"] for m in mults]`).
# KellerJordan/modded-nanogpt train_gpt_medium.py at
# f411b3d346aa52d3504324ca93c230fd84c6c07f (lines ~626-643) shows the cured
# form: per-parameter multipliers are kept as a CPU tensor ("to enable Inductor
# constant folding") and scaled as `group["param_lr_cpu"] * group["lr"]`. This
# program keeps them as Python floats, one per parameter, passed to a compiled
# kernel while a schedule rewrites `group["lr"]` every step.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 2
# graphs over 10 steps; hand-fixed (lr as a float64 0-d tensor at the call):
# 1, same output.
import torch


@torch.compile(backend="eager")
def sgd_update(p, grad, lr):
    p.sub_(grad * lr)


class MultiplierSGD(torch.optim.Optimizer):
    def __init__(self, params, lr=0.1, mults=(1.0, 0.5)):
        super().__init__(params, dict(lr=lr))
        self.mults = list(mults)

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            lrs = [m * group["lr"] for m in self.mults]
            for p, lr in zip(group["params"], lrs):
                sgd_update(p, p.grad, lr)  # expect: FR003


torch.manual_seed(0)
a = torch.nn.Parameter(torch.randn(4, 4))
b = torch.nn.Parameter(torch.randn(4, 4))
opt = MultiplierSGD([a, b], lr=0.1)
for step in range(10):
    a.grad = torch.ones_like(a)
    b.grad = torch.ones_like(b)
    for group in opt.param_groups:
        group["lr"] = 0.1 * 0.9 ** step
    opt.step()
print(round(a.sum().item(), 4), round(b.sum().item(), 4))
