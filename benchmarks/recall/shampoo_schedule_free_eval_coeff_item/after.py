# Reproduction of facebookresearch/optimizers (Distributed Shampoo) AFTER 5a873db ("Long time no sync",
# PR #268): the train/eval interpolation coefficients are persistent 0-d tensors
# (state_lists[TRAIN_INTERP_COEFF] / [EVAL_INTERP_COEFF]) filled in place each step, so the compiled
# `_per_group_step_impl` gets the same tensor objects every step and never sees a changing Python float.
# (distributed_shampoo/distributed_shampoo.py, distributor/shampoo_distributor.py,
# preconditioner/sgd_preconditioner_list.py, shampoo_types.py at 5a873db^, trimmed.)
import logging
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any, Callable

import torch
from torch import Tensor, nn

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


logger = logging.getLogger(__name__)

# ---- distributed_shampoo/shampoo_types.py ------------------------------------------------------
PARAMS = "params"
LR = "lr"
BETAS = "betas"
BETA3 = "beta3"
EPSILON = "epsilon"
WEIGHT_DECAY = "weight_decay"
WEIGHT_DECAY_TYPE = "weight_decay_type"
PEAK_LR = "peak_lr"
PRECONDITION_FREQUENCY = "precondition_frequency"
START_PRECONDITIONING_STEP = "start_preconditioning_step"
USE_BIAS_CORRECTION = "use_bias_correction"
ITERATE_AVERAGING_CONFIG = "iterate_averaging_config"
GRAFTING_CONFIG = "grafting_config"
PRECONDITIONER_CONFIG = "preconditioner_config"
DISTRIBUTOR = "distributor"
MASKED_BLOCKED_GRADS = "masked_blocked_grads"
MASKED_BLOCKED_PARAMS = "masked_blocked_params"
PREVIOUS_GRAD_SELECTOR = "previous_grad_selector"
SHAMPOO_PRECONDITIONER_LIST = "shampoo_preconditioner_list"
GRAFTING_PRECONDITIONER_LIST = "grafting_preconditioner_list"
STEP = "step"
LR_TENSOR = "lr_tensor"
LR_CPU_PINNED = "lr_cpu_pinned"
LR_SUM = "lr_sum"
TRAIN_MODE = "train_mode"
WEIGHT_BUFFER = "weight_buffer"
WEIGHT_BUFFER_LIST = "weight_buffer_list"
MASKED_WEIGHT_BUFFER_LIST = "masked_weight_buffer_list"
TRAIN_INTERP_COEFF = "train_interp_coeff"
EVAL_INTERP_COEFF = "eval_interp_coeff"


class WeightDecayType(Enum):
    L2 = 0
    DECOUPLED = 1
    CORRECTED = 2
    INDEPENDENT = 3


@dataclass(kw_only=True)
class SGDPreconditionerConfig:
    pass


@dataclass(kw_only=True)
class IterateAveragingConfig:
    pass


@dataclass(kw_only=True)
class GeneralizedPrimalAveragingConfig(IterateAveragingConfig):
    eval_interp_coeff: float = 0.9
    train_interp_coeff: float = 0.8


@dataclass(kw_only=True)
class ScheduleFreeConfig(IterateAveragingConfig):
    train_interp_coeff: float = 0.8
    eval_coeff_lr_power: int = 2


@dataclass(kw_only=True)
class ShampooPT2CompileConfig:  # (generated from torch.compile's signature; the fields used here)
    fullgraph: bool = False
    dynamic: bool | None = None
    backend: Any = "inductor"
    mode: str | None = None


# ---- distributed_shampoo/preconditioner/sgd_preconditioner_list.py ------------------------------
class SGDPreconditionerList:
    """SGD (identity) preconditioners for a list of parameters."""

    def __init__(self, block_list: tuple[Tensor, ...]) -> None:
        self._block_list = block_list

    def update_preconditioners(
        self,
        masked_grad_list: tuple[Tensor, ...],
        step: Tensor,
        perform_amortized_computation: bool = False,
    ) -> None:
        return

    def precondition(self, masked_grad_list: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        return masked_grad_list

    def compress_preconditioner_list(self, local_grad_selector: tuple[bool, ...]) -> None:
        return


# ---- distributed_shampoo/distributor/shampoo_distributor.py (single-device Distributor) --------
class Distributor:
    def __init__(self, param_group: dict[str, Any]) -> None:
        self._param_group = param_group
        # (merge_small_dims / multi_dim_split are identities for params smaller than max_preconditioner_dim)
        self._global_blocked_params = tuple(p.detach() for p in param_group[PARAMS])
        self._global_grad_selector: tuple[bool, ...] = (True,) * len(self._global_blocked_params)
        self._local_grad_selector: tuple[bool, ...] = self._global_grad_selector
        self._local_blocked_params = self._global_blocked_params
        self._local_masked_blocked_params = self._local_blocked_params

    @property
    def local_grad_selector(self) -> tuple[bool, ...]:
        return self._local_grad_selector

    @property
    def local_blocked_params(self) -> tuple[Tensor, ...]:
        return self._local_blocked_params

    @property
    def local_masked_blocked_params(self) -> tuple[Tensor, ...]:
        return self._local_masked_blocked_params

    @torch.no_grad()
    def update_params(
        self,
        blocked_search_directions: tuple[Tensor, ...],
        use_masked_tensors: bool = True,
    ) -> None:
        target_params = (
            self._local_masked_blocked_params
            if use_masked_tensors
            else self._local_blocked_params
        )
        assert len(blocked_search_directions) == len(target_params)
        if blocked_search_directions:
            torch._foreach_add_(
                target_params,
                blocked_search_directions,
            )

    def merge_and_block_gradients(self) -> tuple[Tensor, ...]:
        return tuple(p.grad for p in self._param_group[PARAMS] if p.grad is not None)


# ---- distributed_shampoo/distributed_shampoo.py -----------------------------------------------
class DistributedShampoo(torch.optim.Optimizer):
    def __init__(
        self,
        params,
        lr: float = 1e-2,
        betas: tuple[float, float] = (0.9, 1.0),
        beta3: float = -1.0,
        epsilon: float = 1e-12,
        weight_decay: float = 0.0,
        peak_lr: float = 0.0,
        precondition_frequency: int = 1,
        start_preconditioning_step: int = -1,
        use_bias_correction: bool = True,
        weight_decay_type: WeightDecayType = WeightDecayType.DECOUPLED,
        iterate_averaging_config: IterateAveragingConfig | None = None,
        grafting_config=None,
        shampoo_pt2_compile_config: ShampooPT2CompileConfig | None = None,
        preconditioner_config=SGDPreconditionerConfig(),
    ) -> None:
        super().__init__(
            params,
            {
                LR: lr,
                BETAS: betas,
                BETA3: beta3 if beta3 != -1.0 else betas[0],
                EPSILON: epsilon,
                WEIGHT_DECAY: weight_decay,
                PEAK_LR: peak_lr,
                WEIGHT_DECAY_TYPE: weight_decay_type,
                PRECONDITION_FREQUENCY: precondition_frequency,
                START_PRECONDITIONING_STEP: (
                    start_preconditioning_step
                    if start_preconditioning_step != -1
                    else precondition_frequency
                ),
                USE_BIAS_CORRECTION: use_bias_correction,
                ITERATE_AVERAGING_CONFIG: iterate_averaging_config,
                GRAFTING_CONFIG: grafting_config,
                PRECONDITIONER_CONFIG: preconditioner_config,
            },
        )
        self._shampoo_pt2_compile_config: ShampooPT2CompileConfig | None = (
            shampoo_pt2_compile_config
        )
        self._per_group_state_lists: list[dict[str, Any]] = [
            {} for _ in self.param_groups
        ]
        self._instantiate_distributor()
        self._instantiate_shampoo_preconditioner_list()
        self._instantiate_steps()
        self._instantiate_lr_tensors()
        self._instantiate_iterate_averaging()
        self._instantiate_per_group_step(
            shampoo_pt2_compile_config=shampoo_pt2_compile_config
        )

    @torch.no_grad()
    def _instantiate_distributor(self) -> None:
        for state_lists, group in zip(
            self._per_group_state_lists, self.param_groups, strict=True
        ):
            state_lists[DISTRIBUTOR] = Distributor(group)
            state_lists[MASKED_BLOCKED_PARAMS] = state_lists[
                DISTRIBUTOR
            ].local_blocked_params
            state_lists[PREVIOUS_GRAD_SELECTOR] = None

    @torch.no_grad()
    def _instantiate_shampoo_preconditioner_list(self) -> None:
        for state_lists in self._per_group_state_lists:
            state_lists[SHAMPOO_PRECONDITIONER_LIST] = SGDPreconditionerList(
                block_list=state_lists[DISTRIBUTOR].local_blocked_params,
            )

    @torch.no_grad()
    def _instantiate_steps(self) -> None:
        for state_lists, group in zip(
            self._per_group_state_lists, self.param_groups, strict=True
        ):
            state_lists[STEP] = torch.tensor(0, dtype=torch.int64, device="cpu")
            self.state[group[PARAMS][0]][STEP] = state_lists[STEP]

    @torch.no_grad()
    def _instantiate_lr_tensors(self) -> None:
        """Pre-allocate persistent lr tensors to avoid per-step pinned memory allocation."""
        for state_lists, group in zip(
            self._per_group_state_lists, self.param_groups, strict=True
        ):
            device = group[PARAMS][0].device
            state_lists[LR_TENSOR] = torch.empty((), dtype=torch.float, device=device)
            state_lists[LR_CPU_PINNED] = torch.empty((), dtype=torch.float)
            # Pre-allocate persistent interp coeff tensors for iterate averaging.
            # Using persistent tensors avoids Dynamo recompilation: Dynamo treats
            # tensor inputs as dynamic (doesn't specialize on value), unlike Python
            # floats which trigger recompilation on every value change. This is
            # critical for ScheduleFreeConfig where eval_interp_coeff changes every step.
            state_lists[TRAIN_INTERP_COEFF] = torch.zeros(
                (), dtype=torch.float, device=device
            )
            state_lists[EVAL_INTERP_COEFF] = torch.zeros(
                (), dtype=torch.float, device=device
            )

    @torch.no_grad()
    def _instantiate_iterate_averaging(self) -> None:
        for state_lists, group in zip(
            self._per_group_state_lists, self.param_groups, strict=True
        ):
            if group[ITERATE_AVERAGING_CONFIG] is None:
                continue

            # Construct local weight buffer list.
            local_weight_buffer_list = []
            for i, block in enumerate(state_lists[DISTRIBUTOR].local_blocked_params):
                block_state = self.state[group[PARAMS][i]].setdefault("block_0", {})
                block_state[WEIGHT_BUFFER] = torch.zeros_like(block)
                local_weight_buffer = block_state[WEIGHT_BUFFER]
                local_weight_buffer.copy_(block)
                local_weight_buffer_list.append(local_weight_buffer)

            state_lists[WEIGHT_BUFFER_LIST] = local_weight_buffer_list
            state_lists[MASKED_WEIGHT_BUFFER_LIST] = state_lists[WEIGHT_BUFFER_LIST]

            state_lists[LR_SUM] = torch.tensor(
                0.0,
                dtype=torch.float,
                device=group[PARAMS][0].device,
            )
            state_lists[TRAIN_MODE] = torch.tensor(True, dtype=torch.bool, device="cpu")
            self.state[group[PARAMS][0]][TRAIN_MODE] = state_lists[TRAIN_MODE]
            self.state[group[PARAMS][0]][LR_SUM] = state_lists[LR_SUM]

    @torch.no_grad()
    def _instantiate_per_group_step(
        self, shampoo_pt2_compile_config: ShampooPT2CompileConfig | None
    ) -> None:
        # Use PT2 to compile the step function for each parameter group.
        self._per_group_step: Callable[..., None] = (
            torch.compile(
                self._per_group_step_impl, **asdict(shampoo_pt2_compile_config)
            )
            if shampoo_pt2_compile_config is not None
            else self._per_group_step_impl
        )

    @staticmethod
    @torch.no_grad()
    def _mask_state_lists(
        state_lists: dict[str, Any],
        group: dict[str, Any],
        shampoo_pt2_enabled: bool = False,
    ) -> None:
        if (
            state_lists[DISTRIBUTOR].local_grad_selector
            == state_lists[PREVIOUS_GRAD_SELECTOR]
        ):
            return
        state_lists[PREVIOUS_GRAD_SELECTOR] = state_lists[
            DISTRIBUTOR
        ].local_grad_selector
        state_lists[MASKED_BLOCKED_PARAMS] = state_lists[
            DISTRIBUTOR
        ].local_masked_blocked_params
        state_lists[SHAMPOO_PRECONDITIONER_LIST].compress_preconditioner_list(
            local_grad_selector=state_lists[DISTRIBUTOR].local_grad_selector,
        )

    @torch.no_grad()
    @torch.compiler.disable
    def _precondition_and_grafting(
        self,
        state_lists: dict[str, Any],
        masked_filtered_grad_list: tuple[torch.Tensor, ...],
        use_grafting_method: bool,
        grafting_config_not_none: bool,
    ) -> tuple[torch.Tensor, ...]:
        masked_blocked_search_directions = state_lists[
            SHAMPOO_PRECONDITIONER_LIST
        ].precondition(
            masked_grad_list=masked_filtered_grad_list,
        )
        return masked_blocked_search_directions

    @torch.no_grad()
    def _add_l2_regularization(
        self,
        state_lists: dict[str, Any],
        weight_decay: float,
        weight_decay_type: WeightDecayType,
    ) -> None:
        if weight_decay != 0.0 and weight_decay_type == WeightDecayType.L2:
            torch._foreach_add_(
                state_lists[MASKED_BLOCKED_GRADS],
                state_lists[MASKED_BLOCKED_PARAMS],
                alpha=weight_decay,
            )

    @torch.no_grad()
    def _update_preconditioners(
        self,
        state_lists: dict[str, Any],
        step: torch.Tensor,
        perform_amortized_computation: bool,
        grafting_config_not_none: bool,
    ) -> None:
        state_lists[SHAMPOO_PRECONDITIONER_LIST].update_preconditioners(
            masked_grad_list=state_lists[MASKED_BLOCKED_GRADS],
            step=step,
            perform_amortized_computation=perform_amortized_computation,
        )

    @torch.no_grad()
    def _compute_filtered_grad_list(
        self,
        state_lists: dict[str, Any],
        step: torch.Tensor,
        beta1: float,
        beta3: float,
        use_bias_correction: bool,
    ) -> tuple[torch.Tensor, ...]:
        # (betas[0] == 0.0 in the Schedule-Free setup: no filtered-grad state)
        masked_filtered_grad_list = state_lists[MASKED_BLOCKED_GRADS]
        return masked_filtered_grad_list

    @torch.no_grad()
    def _apply_decoupled_or_corrected_weight_decay(
        self,
        state_lists: dict[str, Any],
        masked_blocked_search_directions: tuple[torch.Tensor, ...],
        lr: torch.Tensor,
        weight_decay: float,
        peak_lr: float,
        weight_decay_type: WeightDecayType,
    ) -> None:
        if weight_decay != 0.0 and weight_decay_type == WeightDecayType.DECOUPLED:
            torch._foreach_add_(
                masked_blocked_search_directions,
                state_lists[MASKED_BLOCKED_PARAMS],
                alpha=weight_decay,
            )

    @staticmethod
    @torch.no_grad()
    def _get_train_and_eval_interp_coeffs(
        iterate_averaging_config: IterateAveragingConfig | None,
        lr: torch.Tensor | None,
        state_lists: dict[str, Any],
    ) -> tuple[torch.Tensor, torch.Tensor]:
        # Persistent tensors pre-allocated in _instantiate_lr_tensors; filled in place below.
        train_interp_coeff = state_lists[TRAIN_INTERP_COEFF]
        eval_interp_coeff = state_lists[EVAL_INTERP_COEFF]
        if iterate_averaging_config is None:
            return (train_interp_coeff, eval_interp_coeff)

        match iterate_averaging_config:
            case GeneralizedPrimalAveragingConfig():
                train_interp_coeff.fill_(iterate_averaging_config.train_interp_coeff)
                eval_interp_coeff.fill_(iterate_averaging_config.eval_interp_coeff)
            case ScheduleFreeConfig():
                train_interp_coeff.fill_(iterate_averaging_config.train_interp_coeff)
                if lr is not None:
                    # Based on Equation (23) in The Road Less Scheduled (https://arxiv.org/pdf/2405.15682).
                    # In the simplest case, computes eval_interp_coeff = 1 - gamma_t^2 / \sum_{i=1}^t gamma_i^2.
                    lr_sum = state_lists[LR_SUM]
                    lr_power = torch.pow(
                        lr, iterate_averaging_config.eval_coeff_lr_power
                    )
                    lr_sum += lr_power
                    # Keep as tensor — avoids .item() which creates a Python float
                    # that Dynamo would specialize on, causing recompilation every step.
                    eval_interp_coeff.copy_(1.0 - lr_power / lr_sum)
                else:
                    logger.warning(
                        "lr or lr_sum not provided to _get_train_and_eval_interp_coeffs; returning eval_interp_coeff = 0.0!"
                    )
                    eval_interp_coeff.fill_(0.0)
            case _:
                raise ValueError(
                    f"Unsupported iterate averaging config {iterate_averaging_config=}!"
                )

        return (train_interp_coeff, eval_interp_coeff)

    @torch.no_grad()
    def _apply_in_place_primal_averaging(
        self,
        state_lists: dict[str, Any],
        masked_blocked_search_directions: tuple[torch.Tensor, ...],
        train_interp_coeff: torch.Tensor,
        eval_interp_coeff: torch.Tensor,
    ) -> None:
        # Raise user error when attempting to perform primal averaging but not in train mode.
        if not state_lists[TRAIN_MODE]:
            raise RuntimeError(
                "Called _apply_in_place_primal_averaging when not in train mode. Call optimizer.train() before calling optimizer.step()!"
            )

        # Compute (1 - mu_x) * (Z - Y) using the OLD Z value before updating Z.
        z_minus_y_term = torch._foreach_sub(
            state_lists[MASKED_WEIGHT_BUFFER_LIST],  # Z (old)
            state_lists[MASKED_BLOCKED_PARAMS],  # Y = W
        )

        # Update Z with gradient descent step: Z <- Z - lr * P.
        torch._foreach_add_(
            state_lists[MASKED_WEIGHT_BUFFER_LIST],
            masked_blocked_search_directions,
        )

        # This computes: - (1 - mu_x * mu_y) * lr * P.
        torch._foreach_mul_(
            masked_blocked_search_directions,
            (1 - train_interp_coeff * eval_interp_coeff),  # type: ignore
        )
        # This computes: (1 - mu_x) * (Z_old - Y) - (1 - mu_x * mu_y) * lr * P.
        torch._foreach_add_(
            masked_blocked_search_directions,
            z_minus_y_term,
            alpha=(1 - eval_interp_coeff),  # type: ignore
        )

    @torch.no_grad()
    def _compute_search_directions(
        self,
        state_lists: dict[str, Any],
        step: torch.Tensor,
        lr: torch.Tensor,
        beta1: float,
        beta3: float,
        weight_decay: float,
        peak_lr: float,
        weight_decay_type: WeightDecayType,
        grafting_config_not_none: bool,
        perform_amortized_computation: bool,
        use_bias_correction: bool,
        use_grafting_method: bool,
        train_interp_coeff: torch.Tensor,
        eval_interp_coeff: torch.Tensor,
    ) -> tuple[torch.Tensor, ...]:
        self._add_l2_regularization(
            state_lists,
            weight_decay,
            weight_decay_type,
        )
        self._update_preconditioners(
            state_lists=state_lists,
            step=step,
            perform_amortized_computation=perform_amortized_computation,
            grafting_config_not_none=grafting_config_not_none,
        )
        masked_filtered_grad_list = self._compute_filtered_grad_list(
            state_lists,
            step,
            beta1,
            beta3,
            use_bias_correction,
        )
        masked_blocked_search_directions = self._precondition_and_grafting(
            state_lists,
            masked_filtered_grad_list,
            use_grafting_method,
            grafting_config_not_none,
        )
        self._apply_decoupled_or_corrected_weight_decay(
            state_lists,
            masked_blocked_search_directions,
            lr,
            weight_decay,
            peak_lr,
            weight_decay_type,
        )

        # Multiplies the learning rate to the search direction / update.
        torch._foreach_mul_(masked_blocked_search_directions, -lr)

        # Incorporates primal averaging into the search direction if enabled.
        self._apply_in_place_primal_averaging(
            state_lists,
            masked_blocked_search_directions,
            train_interp_coeff,
            eval_interp_coeff,
        )

        return masked_blocked_search_directions

    @torch.no_grad()
    def _per_group_step_impl(
        self,
        state_lists: dict[str, Any],
        step: torch.Tensor,
        lr: torch.Tensor,
        beta1: float,
        beta3: float,
        weight_decay: float,
        peak_lr: float,
        weight_decay_type: WeightDecayType,
        grafting_config_not_none: bool,
        perform_amortized_computation: bool,
        use_bias_correction: bool,
        use_grafting_method: bool,
        train_interp_coeff: torch.Tensor,
        eval_interp_coeff: torch.Tensor,
    ) -> None:
        state_lists[DISTRIBUTOR].update_params(
            blocked_search_directions=self._compute_search_directions(
                state_lists=state_lists,
                step=step,
                lr=lr,
                beta1=beta1,
                beta3=beta3,
                weight_decay=weight_decay,
                peak_lr=peak_lr,
                weight_decay_type=weight_decay_type,
                grafting_config_not_none=grafting_config_not_none,
                perform_amortized_computation=perform_amortized_computation,
                use_bias_correction=use_bias_correction,
                use_grafting_method=use_grafting_method,
                train_interp_coeff=train_interp_coeff,
                eval_interp_coeff=eval_interp_coeff,
            )
            if state_lists[MASKED_BLOCKED_GRADS]
            else ()
        )

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()

        for state_lists, group in zip(
            self._per_group_state_lists, self.param_groups, strict=True
        ):
            state_lists[MASKED_BLOCKED_GRADS] = state_lists[
                DISTRIBUTOR
            ].merge_and_block_gradients()

            DistributedShampoo._mask_state_lists(
                state_lists=state_lists,
                group=group,
                shampoo_pt2_enabled=self._shampoo_pt2_compile_config is not None,
            )

            # Iterate group step counter and define Python scalar step.
            step = state_lists[STEP].add_(1)
            step_val = step.item()
            # Using a persistent tensor also avoids PT2 recompilation: since lr
            # is the same tensor object every step, PT2 treats it as a dynamic
            # input rather than specializing on each new tensor/value.
            state_lists[LR_CPU_PINNED].fill_(group[LR])
            lr = state_lists[LR_TENSOR]
            lr.copy_(state_lists[LR_CPU_PINNED], non_blocking=True)
            beta1 = group[BETAS][0]
            beta3 = group[BETA3]
            weight_decay = group[WEIGHT_DECAY]
            peak_lr = group[PEAK_LR]
            weight_decay_type = group[WEIGHT_DECAY_TYPE]
            grafting_config_not_none = group[GRAFTING_CONFIG] is not None
            perform_amortized_computation = (
                step_val % group[PRECONDITION_FREQUENCY] == 0
                and step_val > group[START_PRECONDITIONING_STEP]
            ) or step_val == group[START_PRECONDITIONING_STEP]
            use_bias_correction = group[USE_BIAS_CORRECTION]
            use_grafting_method = (
                step_val < group[START_PRECONDITIONING_STEP]
                and grafting_config_not_none
            )
            # Set train and eval interpolation coefficients if enabled.
            train_interp_coeff, eval_interp_coeff = (
                self._get_train_and_eval_interp_coeffs(
                    iterate_averaging_config=group[ITERATE_AVERAGING_CONFIG],
                    lr=lr,
                    state_lists=state_lists,
                )
            )

            self._per_group_step(
                state_lists,
                step,
                lr,
                beta1,
                beta3,
                weight_decay,
                peak_lr,
                weight_decay_type,
                grafting_config_not_none,
                perform_amortized_computation,
                use_bias_correction,
                use_grafting_method,
                train_interp_coeff,
                eval_interp_coeff,
            )

            state_lists[MASKED_BLOCKED_GRADS] = None

        return loss


# ---- driver (README "Schedule-Free" example + distributor/gpu_tests/shampoo_recompilation_test.py) --
NUM_STEPS = 6
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 8, bias=False), nn.Linear(8, 1, bias=False))
loss_fn = nn.MSELoss()
train_data = torch.randn(NUM_STEPS, 16)
target = torch.tensor([0.0])

optimizer = DistributedShampoo(
    model.parameters(),
    lr=0.01,
    betas=(0.0, 1.0),
    epsilon=1e-12,
    weight_decay=1e-05,
    precondition_frequency=2,
    start_preconditioning_step=2,
    weight_decay_type=WeightDecayType.DECOUPLED,
    preconditioner_config=SGDPreconditionerConfig(),
    iterate_averaging_config=ScheduleFreeConfig(),
    shampoo_pt2_compile_config=ShampooPT2CompileConfig(backend=counting_backend),
)

checksum = 0.0
for step in range(1, NUM_STEPS + 1):
    optimizer.zero_grad()
    objective = loss_fn(model(train_data[step - 1]), target)
    objective.backward()
    optimizer.step()
    checksum += objective.item()
checksum += sum(p.double().sum().item() for p in model.parameters())

print(f"GRAPHS {GRAPHS}")
print(f"OUT {checksum:.6f}")
