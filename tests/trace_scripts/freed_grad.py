# A custom optimizer compiles its per-parameter step as a bound method that
# reads self.state[p] (Koratahiu/Advanced_Optimizers#6): the compiled code
# reaches p through the state dict's keys and guards p.grad by weak
# reference; zero_grad() (set_to_none) frees it every step, which
# invalidates the cache entry: 8 graphs, then the recompile limit.
import torch


class Opt(torch.optim.Optimizer):
    def __init__(self, params):
        super().__init__(params, dict(lr=0.1))
        self._compiled = torch.compile(self._step_parameter, backend="eager")

    def _step_parameter(self, p):
        state = self.state[p]
        state["n"] = state.get("n", 0) + 1
        p.add_(p.grad, alpha=-0.1)

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                self._compiled(p)


torch.manual_seed(0)
w = torch.nn.Parameter(torch.randn(4))
opt = Opt([w])
for _ in range(12):
    (w * w).sum().backward()
    opt.step()
    opt.zero_grad()
print(round(w.sum().item(), 4))
