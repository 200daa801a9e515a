"""Prove every row of ``codemods/optim_table.py`` on the installed torch.

Each accepted row: build the optimizer (and scheduler) with tensor scalars,
step inside ``torch.compile(backend="eager")`` a few times: no exception, and
the lr is still a tensor afterwards.  Each rejected entry: the exception
really happens.  So the table the pass relies on cannot rot.
"""

from __future__ import annotations

import inspect
import warnings

import pytest

import torch
import torch._dynamo

from codemods.analysis.optim_table import OPTIMIZERS, SCHEDULERS, optimizer_row, scheduler_row

S = torch.optim.lr_scheduler

# arguments a scheduler needs besides its tensorized scalars (test-only detail)
REQUIRED = {
    "StepLR": {"step_size": 2},
    "MultiStepLR": {"milestones": [1, 2]},
    "CosineAnnealingLR": {"T_max": 5},
    "PolynomialLR": {"total_iters": 5},
    "OneCycleLR": {"total_steps": 10, "cycle_momentum": False},
    "CyclicLR": {"step_size_up": 2, "cycle_momentum": False},
    "CosineAnnealingWarmRestarts": {"T_0": 2},
    "LambdaLR": {"lr_lambda": lambda epoch: 0.9**epoch},
    "MultiplicativeLR": {"lr_lambda": lambda epoch: 0.9},
    "ReduceLROnPlateau": {"patience": 0},
}
# a tensor value for each tensorized keyword (valid for its scheduler)
VALUES = {"gamma": 0.5, "start_factor": 0.5, "end_factor": 1.0, "eta_min": 1e-3, "power": 2.0,
          "factor": 0.5, "max_lr": 0.1, "base_lr": 1e-3}


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
    torch._dynamo.reset()


def _model():
    torch.manual_seed(0)
    return torch.nn.Linear(3, 1)


def _train(opt, model, sched=None, steps=4, closure=False):
    x = torch.randn(4, 3)
    plateau = isinstance(sched, S.ReduceLROnPlateau)

    @torch.compile(backend="eager")
    def step():
        if closure:
            def c():
                opt.zero_grad()
                loss = model(x).pow(2).sum()
                loss.backward()
                return loss

            opt.step(c)
        else:
            opt.step()
        if sched is not None and not plateau:
            sched.step()

    for _ in range(steps):
        if not closure:
            opt.zero_grad()
            model(x).pow(2).sum().backward()
        step()
        if plateau:
            sched.step(1.0)  # a flat metric: reduces the lr every step


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_optimizer_accepts_tensor_lr_in_compiled_step(name):
    row = OPTIMIZERS[name]
    model = _model()
    opt = getattr(torch.optim, name)(model.parameters(), lr=torch.tensor(row.default_lr))
    _train(opt, model, closure=row.needs_closure)
    assert isinstance(opt.param_groups[0]["lr"], torch.Tensor)


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_default_lr_matches_torch(name):
    default = inspect.signature(getattr(torch.optim, name)).parameters["lr"].default
    assert float(default) == OPTIMIZERS[name].default_lr
    assert list(inspect.signature(getattr(torch.optim, name)).parameters)[:2] == ["params", "lr"]


@pytest.mark.parametrize("name", [n for n, r in OPTIMIZERS.items() if r.foreach_needs_capturable])
def test_foreach_tensor_lr_needs_capturable(name):
    cls = getattr(torch.optim, name)
    with pytest.raises(ValueError, match="lr as a Tensor is not supported"):
        cls(_model().parameters(), lr=torch.tensor(0.01), foreach=True)
    model = _model()
    opt = cls(model.parameters(), lr=torch.tensor(0.01), foreach=True, capturable=True)
    _train(opt, model)
    # ...but capturable=True fails in an eager step on CPU parameters, which is
    # why the pass never adds it (it drops foreach=True instead, as an unsafe fix)
    model = _model()
    opt = cls(model.parameters(), lr=torch.tensor(0.01), foreach=True, capturable=True)
    model(torch.ones(1, 3)).sum().backward()
    with pytest.raises(AssertionError, match="capturable"):
        opt.step()


@pytest.mark.parametrize("name", [n for n, r in OPTIMIZERS.items() if not r.foreach_needs_capturable and not r.needs_closure and n != "Adafactor"])
def test_foreach_tensor_lr_accepted(name):
    model = _model()
    opt = getattr(torch.optim, name)(model.parameters(), lr=torch.tensor(0.01), foreach=True)
    _train(opt, model)


@pytest.mark.parametrize("name", list(SCHEDULERS))
def test_scheduler_accepts_tensor_scalars_in_compiled_step(name):
    row = SCHEDULERS[name]
    cls = getattr(S, name)
    params = list(inspect.signature(cls).parameters)
    for kw, index in list(row.tensor_params.items()) + [(k, i) for k, (i, _) in row.rejected_params.items()]:
        assert params[index] == kw, f"{name}: {kw} is not positional #{index}"
    model = _model()
    opt = torch.optim.Adam(model.parameters(), lr=torch.tensor(0.01))
    kwargs = dict(REQUIRED.get(name, {}))
    kwargs.update({kw: torch.tensor(VALUES[kw]) for kw in row.tensor_params})
    sched = cls(opt, **kwargs)
    _train(opt, model, sched)
    assert isinstance(opt.param_groups[0]["lr"], torch.Tensor), f"{name} replaced the tensor lr"


@pytest.mark.parametrize("name, kw", [(n, k) for n, r in SCHEDULERS.items() for k in r.rejected_params])
def test_rejected_scheduler_scalars_really_fail(name, kw):
    _index, message = SCHEDULERS[name].rejected_params[kw]
    opt = torch.optim.Adam(_model().parameters(), lr=torch.tensor(0.01))
    kwargs = dict(REQUIRED.get(name, {}))
    kwargs[kw] = torch.tensor(VALUES[kw])
    with pytest.raises(Exception, match=message):
        getattr(S, name)(opt, **kwargs)


@pytest.mark.parametrize("name", [n for n, r in SCHEDULERS.items() if r.cycles_momentum])
def test_cycle_momentum_writes_python_floats(name):
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=torch.tensor(0.01), momentum=0.9)
    kwargs = dict(REQUIRED[name])
    kwargs["cycle_momentum"] = True
    kwargs.update({kw: torch.tensor(VALUES[kw]) for kw in SCHEDULERS[name].tensor_params})
    sched = getattr(S, name)(opt, **kwargs)
    sched.step()
    assert type(opt.param_groups[0]["momentum"]) is float


def test_weight_decay_and_eps_stay_numbers():
    from codemods.analysis.optim_table import NEVER_TENSORIZE

    assert set(NEVER_TENSORIZE) == {"weight_decay", "eps"}


def test_row_lookup_by_qualified_name():
    assert optimizer_row("torch.optim.Adam").name == "Adam"
    assert optimizer_row("torch.optim.adam.Adam").name == "Adam"
    assert optimizer_row("torch.optim.lr_scheduler.StepLR") is None
    assert optimizer_row("mylib.optim.Adam") is None
    assert scheduler_row("torch.optim.lr_scheduler.StepLR").name == "StepLR"
    assert scheduler_row("torch.optim.Adam") is None
    for name in SCHEDULERS:
        assert hasattr(S, name)


def test_tensor_lr_compiles_fewer_graphs_than_float():
    """FACTS: Adam(lr=0.01)+ExponentialLR(0.9), 12 steps: 3 graphs -> 2 with tensor lr."""
    from torch._dynamo.testing import CompileCounter

    def graphs(lr, gamma):
        torch._dynamo.reset()
        model = _model()
        opt = torch.optim.Adam(model.parameters(), lr=lr)
        sched = S.ExponentialLR(opt, gamma)
        cnt = CompileCounter()

        @torch.compile(backend=cnt)
        def step():
            opt.step()
            sched.step()

        x = torch.randn(4, 3)
        for _ in range(12):
            opt.zero_grad()
            model(x).sum().backward()
            step()
        return cnt.frame_count

    before = graphs(0.01, 0.9)
    after = graphs(torch.tensor(0.01), torch.tensor(0.9))
    assert after < before, (before, after)


# -- issue 15, item 1: param groups with their own lr --------------------------------
GROUPS = """\
import torch

torch.manual_seed(0)
backbone = torch.nn.Linear(4, 4)
head = torch.nn.Linear(4, 1)
base_lr = 0.05
opt = torch.optim.SGD([{{"params": backbone.parameters(), "lr": {group_lr}}}, {{"params": head.parameters()}}], lr=base_lr, momentum=0.9)
x = torch.randn(16, 4)
y = torch.randn(16, 1)


@torch.compile
def train_step():
    opt.step()


for i in range(6):
    for g in opt.param_groups:
        g["lr"] = base_lr / (1 + i)
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(head(backbone(x)), y)
    loss.backward()
    train_step()
print("final loss", round(loss.item(), 4))
"""


@pytest.mark.runtime
def test_every_group_lr_becomes_a_tensor_or_no_fix(tmp_path):
    """The issue's script: before, the group's own float lr met `.fill_` and
    crashed.  A constant group lr is wrapped with the rest (the fixed script
    runs and prints what eager prints); one that is not visible as a constant
    (`base_lr * 0.1`) gets a finding and no fix."""
    from golden import runtime_report

    from codemods.analysis.context import Settings
    from codemods.pipeline.engine import process_source

    settings = Settings(select=frozenset({"FR004"}))
    literal = GROUPS.format(group_lr="0.005").encode()
    result = process_source("t.py", "t.py", literal, settings)
    assert result.new is not None and b'"lr": torch.tensor(0.005)' in result.new and b'g["lr"].fill_(' in result.new
    before, after = tmp_path / "before.py", tmp_path / "after.py"
    before.write_bytes(literal)
    after.write_bytes(result.new)
    report = runtime_report(str(before), str(after))
    assert report["after"]["stdout"] == report["eager"]["stdout"] != ""

    computed = GROUPS.format(group_lr="base_lr * 0.1").encode()
    result = process_source("t.py", "t.py", computed, settings)
    assert result.new is None
    assert [f.fix for f in result.findings] == [None]
    assert "every group's lr must be a tensor" in result.findings[0].message
