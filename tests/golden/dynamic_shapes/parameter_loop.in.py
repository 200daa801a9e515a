# golden: --unproven
# An optimizer kernel compiled with dynamic=False and called with every
# parameter itself (HeavyBall#16): a Parameter's shapes stay static whatever
# `dynamic=` says, so removing it alone cures nothing (8 graphs and the limit
# either way, measured); reported with the cures that work, never rewritten.
import torch


@torch.compile(dynamic=False)
def _update(p, g, m, lr):
    m.mul_(0.9).add_(g)
    p.add_(m * lr)


class SGDM(torch.optim.Optimizer):
    def __init__(self, params, lr=0.01):
        super().__init__(params, dict(lr=lr))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                if "m" not in state:
                    state["m"] = torch.zeros_like(p)
                _update(p, p.grad, state["m"], torch.tensor(-group["lr"]))
