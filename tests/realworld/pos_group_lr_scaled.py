# realworld: positive fix=safe graphs=2
# Pattern: issue 12, form 1. KellerJordan/modded-nanogpt at
# f411b3d346aa52d3504324ca93c230fd84c6c07f shows the cured form:
# records/track_2_medium/2025-11-12_BlockMaskRedundantOp/train_gpt_medium.py:110
# passes `eff_lr=torch._as_tensor_fullprec(group["lr"] * max(1, p.size(-2) /
# p.size(-1)) ** 0.5)` to its compiled Muon update. This program is the form
# before the cure: the same float, computed from the param group, passed as a
# Python float while the schedule rewrites `group["lr"]` every step.
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
