"""What torch accepts as 0-d tensors in optimizers and LR schedulers.

The one place FR004 (optimizer-scalars) and its table tests
(``tests/test_optimizer_table.py``) read.  Every row is proven by a test that
builds the optimizer/scheduler pair with tensor scalars and steps it inside
``torch.compile`` under torch 2.13; every "rejected" entry is asserted to
really raise, so the table cannot rot silently.

Measured on torch 2.13 (CPU); the older releases (2.1-2.7: tensor lr with
Adamax/NAdam ``foreach=True``, ReduceLROnPlateau replacing a tensor lr by a
float up to 2.9, schedulers keeping a tensor lr from 2.4/2.5 on) from the
project's recorded measurements on those releases.

Adam/AdamW ``foreach=True`` (issue 12): a tensor lr is rejected there without
``capturable=True``, so FR004's fix drops ``foreach=True``.  Its cost was
measured on the compiled step under the *default inductor backend* on CPU
(``benchmarks/foreach_step.py``, torch 2.13, one thread, the variants timed
interleaved, 40 rounds; min and median ms per step relative to the user's
``foreach=True`` with a float lr):

=========================  ============  ============  ============  ============
variant                    Adam 0.5 M    AdamW 0.5 M   Adam 8.4 M    AdamW 8.4 M
=========================  ============  ============  ============  ============
foreach=None, tensor lr    x0.99 / 1.00  x0.99 / 0.95  x1.06 / 0.94  x0.99 / 0.94
foreach=False, tensor lr   x1.01 / 1.00  x0.98 / 0.95  x1.01 / 0.97  x1.00 / 0.96
=========================  ============  ============  ============  ============

(0.5 M = 8 x Linear(256, 256), 8.4 M = 8 x Linear(1024, 1024); parameters
after the steps agree to 4e-7, the float32 rounding of the tensor lr.)
Inductor fuses the per-parameter loop, so under the default backend dropping
``foreach=True`` costs nothing measurable.  A step that runs eager (outside
the compiled region, after a fallback) or under ``backend="eager"`` does take
the slower single-tensor path (20 x Linear(64): 11.2 ms -> 21.5 ms a step).
Decision: the fix stays as it was -- offered, and unsafe -- because the module
can step the optimizer outside the compiled region or compile with another
backend, which the rule does not check; its message now says which case is
slower.  (A first run that timed the variants one after the other on this
shared machine gave ratios from x0.12 to x10 for the same code: only the
interleaved timing is trusted.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

OPTIM_PREFIX = "torch.optim."
SCHED_PREFIX = "torch.optim.lr_scheduler."

#: keywords never tensorized, whatever the optimizer (FACTS: crash or no gain)
NEVER_TENSORIZE = ("weight_decay", "eps")


@dataclass(frozen=True)
class OptimizerRow:
    name: str
    #: default ``lr`` in torch 2.13 (the value inserted when ``lr`` is omitted)
    default_lr: float
    #: ``foreach=True`` with a tensor lr raises unless ``capturable=True`` too
    #: (and ``capturable=True`` raises in an eager step on CPU parameters)
    foreach_needs_capturable: bool = False
    #: oldest release where ``foreach=True`` accepts a tensor lr (None: every release)
    foreach_min_torch: Optional[Tuple[int, int]] = None
    #: step takes a closure (LBFGS): the table test steps it with one
    needs_closure: bool = False


@dataclass(frozen=True)
class SchedulerRow:
    name: str
    #: keyword -> positional index (counting the optimizer as 0) of the float
    #: scalars the scheduler accepts as 0-d tensors on torch 2.13
    tensor_params: Dict[str, int] = field(default_factory=dict)
    #: keyword -> positional index of scalars that must stay Python numbers,
    #: with the exception torch raises for a tensor
    rejected_params: Dict[str, Tuple[int, str]] = field(default_factory=dict)
    #: writes Python floats into momentum/betas every step while
    #: ``cycle_momentum`` (default True) is on: recompiles whatever lr is
    cycles_momentum: bool = False
    #: oldest release that keeps a tensor lr a tensor (None: every release from 2.1)
    min_torch: Optional[Tuple[int, int]] = None


OPTIMIZERS: Dict[str, OptimizerRow] = {
    row.name: row
    for row in (
        OptimizerRow("SGD", 1e-3),
        OptimizerRow("Adam", 1e-3, foreach_needs_capturable=True),
        OptimizerRow("AdamW", 1e-3, foreach_needs_capturable=True),
        OptimizerRow("RMSprop", 1e-2),
        OptimizerRow("Adagrad", 1e-2),
        OptimizerRow("Adamax", 2e-3, foreach_min_torch=(2, 4)),
        OptimizerRow("NAdam", 2e-3, foreach_min_torch=(2, 4)),
        OptimizerRow("RAdam", 1e-3),
        OptimizerRow("ASGD", 1e-2),
        OptimizerRow("Adadelta", 1.0),
        OptimizerRow("Rprop", 1e-2),
        OptimizerRow("Adafactor", 1e-2),
        OptimizerRow("LBFGS", 1.0, needs_closure=True),
    )
}

SCHEDULERS: Dict[str, SchedulerRow] = {
    row.name: row
    for row in (
        SchedulerRow("ExponentialLR", {"gamma": 1}),
        SchedulerRow("StepLR", {"gamma": 2}),
        SchedulerRow("MultiStepLR", {"gamma": 2}),
        SchedulerRow("LinearLR", {"start_factor": 1, "end_factor": 2}),
        SchedulerRow("CosineAnnealingLR", {"eta_min": 2}),
        SchedulerRow("PolynomialLR", {"power": 2}),
        SchedulerRow("ConstantLR", {"factor": 1}),
        SchedulerRow("OneCycleLR", {"max_lr": 1}, cycles_momentum=True),
        SchedulerRow("CyclicLR", {"base_lr": 1, "max_lr": 2}, cycles_momentum=True),
        SchedulerRow("ReduceLROnPlateau", {"factor": 2}, min_torch=(2, 10)),
        SchedulerRow(
            "CosineAnnealingWarmRestarts",
            {},
            rejected_params={"eta_min": (3, "Expected float or int eta_min")},
        ),
        # lambdas return Python numbers; nothing to tensorize, tensor lr kept
        SchedulerRow("LambdaLR"),
        SchedulerRow("MultiplicativeLR"),
    )
}


def optimizer_row(qualified: str) -> Optional[OptimizerRow]:
    """``torch.optim.Adam`` / ``torch.optim.adam.Adam`` -> its row."""
    if not qualified.startswith(OPTIM_PREFIX) or qualified.startswith(SCHED_PREFIX):
        return None
    return OPTIMIZERS.get(qualified.rsplit(".", 1)[-1])


def scheduler_row(qualified: str) -> Optional[SchedulerRow]:
    if not qualified.startswith(SCHED_PREFIX):
        return None
    return SCHEDULERS.get(qualified.rsplit(".", 1)[-1])


def is_optimizer_name(qualified: str) -> bool:
    """Any ``torch.optim`` class that is not a scheduler (known or not)."""
    return qualified.startswith(OPTIM_PREFIX) and not qualified.startswith(SCHED_PREFIX) and qualified.rsplit(".", 1)[-1][:1].isupper()
