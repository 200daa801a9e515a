"""The torch fact behind FR004's refusal to write a per-group lr with
``.fill_``: every param group without an ``"lr"`` of its own holds the
constructor's ``lr`` object itself, so with a tensor lr they share one tensor
and an in-place write into one group's lr writes them all.  (The rule's side:
goldens ``optimizer_scalars/per_group_lr_scale`` (reported, unchanged) and
``shared_groups_same_lr`` (fixed, runtime proof), and the cross-module case
below.)"""

from __future__ import annotations

import pytest

from codemods.analysis.context import Settings
from test_lr_writers import run_files


@pytest.mark.runtime
def test_groups_without_their_own_lr_share_the_constructors_tensor():
    torch = pytest.importorskip("torch")
    a, b, c = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    opt = torch.optim.AdamW([{"params": a.parameters()}, {"params": b.parameters()}, {"params": c.parameters(), "lr": torch.tensor(0.5)}], lr=torch.tensor(0.1))
    g0, g1, g2 = opt.param_groups
    assert g0["lr"] is g1["lr"] and g2["lr"] is not g0["lr"]
    for scale, g in zip((1.0, 2.0, 3.0), opt.param_groups):
        g["lr"].fill_(0.1 * scale)
    # the first group got the second one's value: a per-group `.fill_` is wrong here
    assert [round(float(g["lr"]), 4) for g in opt.param_groups] == [0.2, 0.2, 0.3]


@pytest.mark.runtime
def test_a_scheduler_with_a_value_per_group_writes_the_shared_tensor_in_place():
    """torch's schedulers `.fill_` a tensor lr: LambdaLR's per-group factors
    on groups sharing the constructor's tensor leave both at the last one
    (golden optimizer_scalars/per_group_lambda is reported, not fixed)."""
    torch = pytest.importorskip("torch")
    a, b = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    lambdas = [lambda e: 1.0, lambda e: 0.5]
    floats = torch.optim.SGD([{"params": a.parameters()}, {"params": b.parameters()}], lr=0.1)
    torch.optim.lr_scheduler.LambdaLR(floats, lambdas)
    shared = torch.optim.SGD([{"params": a.parameters()}, {"params": b.parameters()}], lr=torch.tensor(0.1))
    torch.optim.lr_scheduler.LambdaLR(shared, lambdas)
    assert [round(float(g["lr"]), 4) for g in floats.param_groups] == [0.1, 0.05]
    assert [round(float(g["lr"]), 4) for g in shared.param_groups] == [0.05, 0.05]


WRITER = """
def apply_layer_decay(optimizer, lr):
    for group in optimizer.param_groups:
        group["lr"] = lr * group.get("lr_scale", 1.0)
"""

MAIN = """
import torch

from schedule import apply_layer_decay

a = torch.nn.Linear(4, 4)
b = torch.nn.Linear(4, 4)
opt = torch.optim.AdamW({params}, lr=1e-3)


@torch.compile(backend="eager")
def train_step(x):
    (a(x) + b(x)).sum().backward()
    opt.step()
    opt.zero_grad()


for step in range(6):
    apply_layer_decay(opt, 1e-3 * 0.9 ** step)
    train_step(torch.randn(2, 4))
"""


def _fixes(tmp_path, params: str):
    return run_files(tmp_path, {"schedule.py": WRITER, "main.py": MAIN.format(params=params)}, Settings(unsafe_fixes=True))


def test_a_writer_of_another_module_with_a_per_group_value_is_not_proven_for_shared_groups(tmp_path):
    """`apply_layer_decay` gives each group its own lr: proven for an
    optimizer with one group, not for two groups that share the tensor."""
    one = _fixes(tmp_path / "one" if (tmp_path / "one").mkdir() is None else tmp_path, "a.parameters()")
    assert one["schedule.py"].changed and b'group["lr"].fill_(' in one["schedule.py"].new
    two = _fixes(tmp_path / "two" if (tmp_path / "two").mkdir() is None else tmp_path, '[{"params": a.parameters(), "lr_scale": 0.5}, {"params": b.parameters()}]')
    assert not two["schedule.py"].changed and not two["schedule.py"].findings
