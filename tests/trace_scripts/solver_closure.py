"""A compiled closure reached through a solver class chosen from a registry
(NVIDIA/physicsnemo before 5df43503): ``get_denoiser`` returns the closure
``ode_denoiser``; the script compiles it and hands it to ``sample``, which
builds ``SOLVERS[name](denoiser)``; the solver stores it as
``self.denoiser`` and calls it first with ``t.expand(B)`` (stride 0), then
with a ``torch.where`` result (stride 1): the stride guard fails once
(2 graphs)."""
import torch


class EulerSolver:
    def __init__(self, denoiser):
        self.denoiser = denoiser

    def step(self, x, t_cur, t_next):
        return x + (t_next - t_cur).view(-1, 1) * self.denoiser(x, t_cur)


class HeunSolver:
    def __init__(self, denoiser, alpha=1.0):
        self.denoiser = denoiser
        self.alpha = alpha

    def step(self, x, t_cur, t_next):
        h = (t_next - t_cur).view(-1, 1)
        d_cur = self.denoiser(x, t_cur)
        x_prime = x + self.alpha * h * d_cur
        t_prime = t_cur + self.alpha * (t_next - t_cur)
        t_prime_safe = torch.where(t_prime == 0, t_cur, t_prime)
        d_prime = self.denoiser(x_prime, t_prime_safe)
        return x + h * (d_cur + d_prime) / 2


SOLVERS = {"euler": EulerSolver, "heun": HeunSolver}


class Scheduler:
    def __init__(self, sigma_max=2.0):
        self.sigma_max = sigma_max

    def get_denoiser(self, model):
        def ode_denoiser(x, t):
            return (x - model(x)) / t.view(-1, 1)

        return ode_denoiser


def sample(denoiser, x, steps, solver="heun"):
    solver_cls = SOLVERS[solver]
    solver_ = solver_cls(denoiser)
    t_steps = torch.linspace(2.0, 0.5, steps + 1)
    for i in range(steps):
        t_cur = t_steps[i].expand(x.shape[0])
        t_next = t_steps[i + 1].expand(x.shape[0])
        x = solver_.step(x, t_cur, t_next)
    return x


def components():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 4)
    scheduler = Scheduler()
    return scheduler, scheduler.get_denoiser(model)


scheduler, denoiser = components()
compiled_denoiser = torch.compile(denoiser, backend="eager")
with torch.no_grad():
    x = torch.randn(2, 4)
    eager = sample(denoiser, x, 3)
    compiled = sample(compiled_denoiser, x, 3)
    again = sample(compiled_denoiser, x, 3)
torch.testing.assert_close(eager, compiled)
print("result:", round(float(eager.sum() + compiled.sum() + again.sum()), 4))
