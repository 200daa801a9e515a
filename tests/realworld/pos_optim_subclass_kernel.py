# realworld: positive fix=safe graphs=2
# Pattern: pytorch/ao low-bit optimizers before #812 (commit 1e7f132e3 shows the
# `torch.compile(single_param_adam, ...)(..., group["lr"], ...)` call inside a
# `torch.optim.Optimizer` subclass's `step`; ao then required `group["lr"]` to be
# a tensor), and KellerJordan/modded-nanogpt's DistAdam/Muon subclasses: a
# custom optimizer's `step()` calls a compiled function with `group["lr"]`
# while a scheduler rewrites it as a float every step.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 2
# graphs over 10 steps; hand-fixed (`group["lr"]` as a float64 0-d tensor at
# the call): 1, same output.
import torch


@torch.compile(backend="eager")
def single_param_sgd(p, grad, buf, lr, momentum):
    buf.mul_(momentum).add_(grad)
    p.sub_(buf * lr)


class CompiledSGD(torch.optim.Optimizer):
    def __init__(self, params, lr=0.1, momentum=0.9):
        super().__init__(params, dict(lr=lr, momentum=momentum))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                if not state:
                    state["buf"] = torch.zeros_like(p)
                single_param_sgd(p, p.grad, state["buf"], group["lr"], group["momentum"])  # expect: FR003


torch.manual_seed(0)
w = torch.nn.Parameter(torch.randn(4, 4))
opt = CompiledSGD([w], lr=0.1)
sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (1 + s))
for step in range(10):
    w.grad = torch.ones_like(w)
    opt.step()
    sched.step()
print(round(w.sum().item(), 4))
