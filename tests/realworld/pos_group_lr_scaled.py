# realworld: positive fix=safe graphs=2
# Pattern: KellerJordan/modded-nanogpt (Muon, e.g. train_gpt_medium.py at
# f411b3d346aa52d3504324ca93c230fd84c6c07f and its history): the per-parameter
# learning rate is a float computed from the param group,
# `lr = group["lr"] * max(1.0, rows / cols) ** 0.5`, and passed to a compiled
# update kernel; the schedule rewrites `group["lr"]` every step.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 2
# graphs over 10 steps; hand-fixed (lr as a float64 0-d tensor at the call):
# 1, same output.
import torch


@torch.compile(backend="eager")
def muon_update(p, grad, buf, lr, momentum):
    buf.mul_(momentum).add_(grad)
    update = grad.add(buf, alpha=momentum)
    p.sub_(update * lr)


class Muon(torch.optim.Optimizer):
    def __init__(self, params, lr=0.02, momentum=0.95):
        super().__init__(params, dict(lr=lr, momentum=momentum))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                if "buf" not in state:
                    state["buf"] = torch.zeros_like(p)
                lr = group["lr"] * max(1.0, p.size(-2) / p.size(-1)) ** 0.5
                muon_update(p, p.grad, state["buf"], lr, group["momentum"])  # expect: FR003


torch.manual_seed(0)
w = torch.nn.Parameter(torch.randn(8, 4))
opt = Muon([w], lr=0.02)
for step in range(10):
    w.grad = torch.ones_like(w) * 0.1
    for group in opt.param_groups:
        group["lr"] = 0.02 * (1 - step / 10)
    opt.step()
print(round(w.sum().item(), 4))
