# Reproduction of NVIDIA/physicsnemo HeunSolver BEFORE 5df4350312 ("Added some compile tests, kernel size 3,
# tests for score predictor", PR #1495 "Diffusion ci tests"): `sample()` passes `t.expand(B)` (stride 0) as
# t_cur, and HeunSolver.step calls the (compiled) denoiser first with that t_cur and then with
# `t_prime_safe = torch.where(...)` (a fresh contiguous tensor, stride 1), so the second call fails the
# stride guard of the first graph and recompiles.
# (physicsnemo/diffusion/samplers/{solvers,samplers}.py, noise_schedulers/noise_schedulers.py and
# test/diffusion/{helpers,test_samplers}.py at 5df4350312^, trimmed.)
from abc import ABC
from typing import Any, Dict, List, Literal, Tuple

import torch
from torch import Tensor

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


# ---- physicsnemo/diffusion/samplers/solvers.py -------------------------------------------------
class EulerSolver:
    def __init__(self, denoiser) -> None:
        self.denoiser = denoiser

    def step(self, x: Tensor, t_cur: Tensor, t_next: Tensor) -> Tensor:
        # Reshape t for broadcasting: (B,) -> (B, 1, ..., 1)
        t_cur_bc = t_cur.reshape(-1, *([1] * (x.ndim - 1)))
        t_next_bc = t_next.reshape(-1, *([1] * (x.ndim - 1)))

        # RHS evaluation and step update
        d_cur = self.denoiser(x, t_cur)
        x_next = x + (t_next_bc - t_cur_bc) * d_cur

        return x_next


class HeunSolver:
    def __init__(self, denoiser, alpha: float = 1.0) -> None:
        self.denoiser = denoiser
        if not 0 < alpha <= 1:
            raise ValueError(f"alpha must be in (0, 1], got {alpha}")
        self.alpha = alpha

    def step(self, x: Tensor, t_cur: Tensor, t_next: Tensor) -> Tensor:
        # Reshape t for broadcasting: (B,) -> (B, 1, ..., 1)
        t_cur_bc = t_cur.reshape(-1, *([1] * (x.ndim - 1)))
        t_next_bc = t_next.reshape(-1, *([1] * (x.ndim - 1)))

        h_bc = t_next_bc - t_cur_bc

        # First RHS evaluation
        d_cur = self.denoiser(x, t_cur)

        # Predictor step to intermediate point
        t_prime_bc = t_cur_bc + self.alpha * h_bc
        x_prime = x + self.alpha * h_bc * d_cur

        # Mask for elements where t_next != 0 (need 2nd order correction)
        # Shape: (B, 1, ..., 1) for broadcasting
        mask_bc = (t_next_bc != 0).float()

        # Second RHS evaluation (compute everywhere, masked later)
        # Avoid division by zero in denoiser by using t_cur where t_prime is 0
        t_prime = t_prime_bc.reshape(x.shape[0])
        t_prime_safe = torch.where(t_prime == 0, t_cur, t_prime)
        d_prime = self.denoiser(x_prime, t_prime_safe)

        # Apply 2nd order correction only where t_next != 0
        # Where t_next == 0, use first-order Euler step
        w_cur = 1 - 1 / (2 * self.alpha)
        w_prime = 1 / (2 * self.alpha)
        x_euler = x + h_bc * d_cur
        x_heun = x + h_bc * (w_cur * d_cur + w_prime * d_prime)
        x_next = mask_bc * x_heun + (1 - mask_bc) * x_euler

        return x_next


# ---- physicsnemo/diffusion/samplers/samplers.py ------------------------------------------------
SOLVERS: Dict[str, type] = {
    "euler": EulerSolver,
    "heun": HeunSolver,
}


def sample(
    denoiser,
    xN: Tensor,
    noise_scheduler,
    num_steps: int,
    solver="heun",
    time_steps: Tensor | None = None,
    solver_options: Dict[str, Any] | None = None,
    time_eval: list[int] | None = None,
):
    if solver_options is None:
        solver_options = {}

    # Validate and instantiate solver
    if isinstance(solver, str):
        if solver not in SOLVERS:
            available = ", ".join(f'"{k}"' for k in SOLVERS.keys())
            raise ValueError(
                f"Unknown solver '{solver}'. Available solvers: {available}."
            )
        solver_cls = SOLVERS[solver]
        solver_ = solver_cls(denoiser, **solver_options)
    else:
        # Assume solver is a Solver-like object with a step method
        if solver_options:
            raise ValueError(
                "solver_options must be None when solver is a Solver instance."
            )
        solver_ = solver

    # Generate time-steps from noise_scheduler or use provided ones
    if time_steps is not None:
        t_steps = time_steps.to(device=xN.device, dtype=xN.dtype)
    else:
        t_steps = noise_scheduler.timesteps(num_steps, device=xN.device, dtype=xN.dtype)

    # Main sampling loop
    samples: List[Tensor] = []
    x = xN
    n_steps = len(t_steps) - 1  # Last element is 0 (final time)

    for i in range(n_steps):
        t_cur = t_steps[i]
        t_next = t_steps[i + 1]

        # Expand t to batch dimension: scalar -> (B,)
        batch_size = x.shape[0]
        t_cur_batch = t_cur.expand(batch_size)
        t_next_batch = t_next.expand(batch_size)

        # Perform one solver step
        x = solver_.step(x, t_cur_batch, t_next_batch)

        # Collect sample if requested
        if time_eval is not None and i in time_eval:
            samples.append(x.clone())

    # Return based on time_eval
    if time_eval is not None:
        return samples

    return x


# ---- physicsnemo/diffusion/noise_schedulers/noise_schedulers.py --------------------------------
class LinearGaussianNoiseScheduler(ABC):
    def drift(self, x: Tensor, t: Tensor) -> Tensor:
        t_bc = t.reshape(-1, *([1] * (x.ndim - 1)))
        alpha_t_bc = self.alpha(t_bc)
        alpha_dot_t_bc = self.alpha_dot(t_bc)
        return (alpha_dot_t_bc / alpha_t_bc) * x

    def diffusion(self, x: Tensor, t: Tensor) -> Tensor:
        t_bc = t.reshape(-1, *([1] * (x.ndim - 1)))
        sigma_t_bc = self.sigma(t_bc)
        sigma_dot_t_bc = self.sigma_dot(t_bc)
        alpha_t_bc = self.alpha(t_bc)
        alpha_dot_t_bc = self.alpha_dot(t_bc)
        g_sq_bc = (
            2 * sigma_dot_t_bc * sigma_t_bc
            - 2 * (alpha_dot_t_bc / alpha_t_bc) * sigma_t_bc**2
        )
        return g_sq_bc

    def x0_to_score(self, x0: Tensor, x_t: Tensor, t: Tensor) -> Tensor:
        t_bc = t.reshape(-1, *([1] * (x0.ndim - 1)))
        alpha_t_bc = self.alpha(t_bc)
        sigma_t_bc = self.sigma(t_bc)
        return (alpha_t_bc * x0 - x_t) / (sigma_t_bc**2)

    def get_denoiser(
        self,
        *,
        score_predictor=None,
        x0_predictor=None,
        denoising_type: Literal["ode", "sde"] = "ode",
        **kwargs: Any,
    ):
        # Validate: exactly one of score_predictor or x0_predictor
        if (score_predictor is None) == (x0_predictor is None):
            raise ValueError(
                "Exactly one of 'score_predictor' or 'x0_predictor' "
                "must be provided, not both or neither."
            )

        # Capture methods as local variables to avoid referencing self
        drift = self.drift
        diffusion = self.diffusion
        # Build the score function
        if x0_predictor is not None:
            x0_to_score = self.x0_to_score

            def _score(x: Tensor, t: Tensor) -> Tensor:
                x0 = x0_predictor(x, t)
                return x0_to_score(x0, x, t)

            score_fn = _score
        else:
            score_fn = score_predictor

        if denoising_type == "ode":

            def ode_denoiser(x: Tensor, t: Tensor) -> Tensor:
                score = score_fn(x, t)
                f = drift(x, t)
                g_sq_bc = diffusion(x, t)
                dx_dt = f - 0.5 * g_sq_bc * score
                return dx_dt

            return ode_denoiser

        elif denoising_type == "sde":

            def sde_denoiser(x: Tensor, t: Tensor) -> Tensor:
                score = score_fn(x, t)
                f = drift(x, t)
                g_sq_bc = diffusion(x, t)
                dx_dt = f - g_sq_bc * score
                return dx_dt

            return sde_denoiser

        else:
            raise ValueError(
                f"denoising_type must be 'ode' or 'sde', got '{denoising_type}'"
            )


class EDMNoiseScheduler(LinearGaussianNoiseScheduler):
    def __init__(self, sigma_min: float = 0.002, sigma_max: float = 80.0, rho: float = 7.0,
                 sigma_data: float = 0.5, P_mean: float = -1.2, P_std: float = 1.2) -> None:
        self.sigma_min = sigma_min
        self.sigma_max = sigma_max
        self.rho = rho
        self.sigma_data = sigma_data
        self.P_mean = P_mean
        self.P_std = P_std

    def sigma(self, t: Tensor) -> Tensor:
        return t

    def sigma_inv(self, sigma: Tensor) -> Tensor:
        return sigma

    def sigma_dot(self, t: Tensor) -> Tensor:
        return torch.ones_like(t)

    def alpha(self, t: Tensor) -> Tensor:
        return torch.ones_like(t)

    def alpha_dot(self, t: Tensor) -> Tensor:
        return torch.zeros_like(t)

    def timesteps(self, num_steps: int, *, device=None, dtype=None) -> Tensor:
        step_indices = torch.arange(num_steps, dtype=dtype, device=device)
        smax_inv_rho = self.sigma_max ** (1 / self.rho)
        smin_inv_rho = self.sigma_min ** (1 / self.rho)
        frac = step_indices / (num_steps - 1)
        interp = smax_inv_rho + frac * (smin_inv_rho - smax_inv_rho)
        t_steps = interp**self.rho
        zero = torch.zeros(1, dtype=dtype, device=device)
        return torch.cat([t_steps, zero])


# ---- test/diffusion/helpers.py -----------------------------------------------------------------
class Conv2dX0Predictor(torch.nn.Module):  # (physicsnemo.core.Module -> nn.Module)
    """Minimal x0-predictor using Conv2d for 4D (B, C, H, W) input."""

    def __init__(self, channels: int = 3):
        super().__init__()
        self.net = torch.nn.Conv2d(channels, channels, kernel_size=1)

    def forward(self, x: torch.Tensor, t: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        t_bc = t.view(-1, 1, 1, 1)
        return self.net(x) / (1 + t_bc)


def make_input(shape: Tuple[int, ...], seed: int = 42, device: str = "cpu") -> torch.Tensor:
    gen = torch.Generator(device="cpu")
    gen.manual_seed(seed)
    return torch.randn(*shape, generator=gen).to(device)


def instantiate_model_deterministic(cls, seed: int = 0, **kwargs: Any):
    model = cls(**kwargs)
    gen = torch.Generator(device="cpu")
    gen.manual_seed(seed)
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(torch.randn(param.shape, generator=gen, dtype=param.dtype))
    return model


# ---- test/diffusion/test_samplers.py: TestSampleCompile.test_compiled_denoiser_in_sample ---------
GLOBAL_SEED = 0
BATCH = 2
NUM_STEPS_SHORT = 2


def _make_sampling_components(sched_cls, sched_kwargs, shape, predictor_cls, predictor_kwargs, device, seed=0,
                              num_steps=NUM_STEPS_SHORT, predictor_type="x0"):
    """Create scheduler, model, denoiser, and initial latents."""
    scheduler = sched_cls(**sched_kwargs)
    model = instantiate_model_deterministic(
        predictor_cls,
        seed=seed,
        **predictor_kwargs,
    ).to(device)
    if predictor_type == "score":
        denoiser = scheduler.get_denoiser(score_predictor=model, denoising_type="ode")
    else:
        denoiser = scheduler.get_denoiser(x0_predictor=model, denoising_type="ode")
    t_steps = scheduler.timesteps(num_steps, device=device)
    tN = t_steps[0].expand(shape[0])
    xN = make_input(shape, seed=200, device=device) * tN.view(
        -1, *([1] * (len(shape) - 1))
    )
    return scheduler, model, denoiser, xN


torch.manual_seed(0)
device = "cpu"
checksum = 0.0
# parametrization: spatial "2d" (BATCH, 3, 8, 6) / Conv2dX0Predictor, scheduler "edm", predictor "x0",
# solvers "heun" and "heun_midpoint" ({"alpha": 0.5})
for solver_key, solver_options in [("heun", {}), ("heun", {"alpha": 0.5})]:
    scheduler, _, denoiser, xN = _make_sampling_components(
        EDMNoiseScheduler, {}, (BATCH, 3, 8, 6), Conv2dX0Predictor, {"channels": 3}, device,
        num_steps=NUM_STEPS_SHORT, predictor_type="x0",
    )
    compiled_denoiser = torch.compile(denoiser, fullgraph=True, backend=counting_backend)
    with torch.no_grad():
        torch.manual_seed(GLOBAL_SEED)
        x0_eager = sample(denoiser, xN, scheduler, NUM_STEPS_SHORT, solver=solver_key,
                          solver_options=solver_options or None)
        torch.manual_seed(GLOBAL_SEED)
        x0_compiled = sample(compiled_denoiser, xN, scheduler, NUM_STEPS_SHORT, solver=solver_key,
                             solver_options=solver_options or None)
    torch.testing.assert_close(x0_eager, x0_compiled, atol=0.5, rtol=0.3)
    # Second compiled call — must reuse the graph
    with torch.no_grad():
        torch.manual_seed(GLOBAL_SEED)
        x0_compiled_2 = sample(compiled_denoiser, xN, scheduler, NUM_STEPS_SHORT, solver=solver_key,
                               solver_options=solver_options or None)
    torch.testing.assert_close(x0_compiled, x0_compiled_2, atol=0.5, rtol=0.3)
    checksum += x0_eager.double().sum().item() + x0_compiled.double().sum().item() + x0_compiled_2.double().sum().item()

print(f"GRAPHS {GRAPHS}")
print(f"OUT {checksum:.4f}")
