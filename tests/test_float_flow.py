"""FR003 follows a float from where it is made to the compiled call (issue 12,
forms 1-3): param-group lrs, parameter defaults, ``*args``/``**kwargs``
forwarders.  What counts as evidence that it changes, and where the analysis
must stay quiet.  The realworld programs (tests/test_realworld.py) prove the
positive forms at runtime; these are the edges around them."""

from __future__ import annotations

from codemods.analysis.context import Settings
from codemods.pipeline.engine import process_source
from codemods.findings import Safety

DEFAULT = Settings(select=frozenset({"FR003"}))
UNPROVEN = Settings(select=frozenset({"FR003"}), unproven=True)

KERNEL = "import torch\n\n@torch.compile\ndef kernel(p, grad, lr):\n    p.sub_(grad * lr)\n\n"
OPTIMIZER = (
    "class Opt(torch.optim.Optimizer):\n"
    "    def __init__(self, params, lr=0.1):\n"
    "        super().__init__(params, dict(lr=lr))\n\n"
    "    def step(self):\n"
    "        for group in self.param_groups:\n"
    "            for p in group['params']:\n"
    "                kernel(p, p.grad, {lr})\n\n"
    "w = torch.nn.Parameter(torch.randn(4))\n"
    "opt = Opt([w])\n"
)


def _run(src: str, settings: Settings = DEFAULT):
    result = process_source("m.py", "m.py", src.encode(), settings)
    assert result.error is None, result.error
    return result.findings


def _lines(src: str, settings: Settings = DEFAULT):
    return [f.line for f in _run(src, settings)]


def test_group_lr_written_in_the_training_loop_is_evidence():
    src = KERNEL + OPTIMIZER.format(lr="group['lr']") + "for step in range(5):\n    for g in opt.param_groups:\n        g['lr'] = 0.1 / (1 + step)\n    opt.step()\n"
    found = _run(src)
    assert [f.line for f in found] == [14]
    assert found[0].fix.safety is Safety.SAFE  # grad is `p.grad`: a floating tensor


def test_group_lr_with_a_scheduler_is_evidence():
    src = KERNEL + OPTIMIZER.format(lr="group['lr']") + "sched = torch.optim.lr_scheduler.StepLR(opt, 2)\nfor step in range(5):\n    opt.step()\n    sched.step()\n"
    assert _lines(src) == [14]


def test_group_lr_nothing_changes_is_unproven_only():
    """Read again for every group and parameter, but nothing writes the lr and
    no scheduler is built: no evidence (different groups' lrs are not seen)."""
    src = KERNEL + OPTIMIZER.format(lr="group['lr']") + "for step in range(5):\n    opt.step()\n"
    assert _lines(src) == []
    assert _lines(src, UNPROVEN) == [14]


def test_group_lr_set_once_at_setup_is_no_evidence():
    src = KERNEL + OPTIMIZER.format(lr="group['lr']") + "for g in opt.param_groups:\n    g['lr'] = g['lr'] * 0.5\nfor step in range(5):\n    opt.step()\n"
    assert _lines(src) == []
    in_init = "super().__init__(params, dict(lr=lr))\n        for g in self.param_groups:\n            g['lr'] = g['lr'] * 0.5\n"
    src = (KERNEL + OPTIMIZER.format(lr="group['lr']")).replace("super().__init__(params, dict(lr=lr))\n", in_init) + "for step in range(5):\n    opt.step()\n"
    assert _lines(src) == []
    assert _lines(src.replace("def __init__", "def reset")) == [16]  # a method called any time


def test_group_lr_kept_as_a_tensor_is_not_a_float():
    """A module that writes its lrs with `.fill_` (or as torch tensors) keeps
    them tensors: nothing to wrap, even with a scheduler."""
    src = KERNEL + OPTIMIZER.format(lr="group['lr']") + "sched = torch.optim.lr_scheduler.StepLR(opt, 2)\nfor step in range(5):\n    for g in opt.param_groups:\n        g['lr'].fill_(0.1 / (1 + step))\n    opt.step()\n"
    assert _lines(src, UNPROVEN) == []
    tensor_lr = src.replace("opt = Opt([w])", "opt = Opt([w], lr=torch.tensor(0.1))")
    assert _lines(tensor_lr.replace("g['lr'].fill_(0.1 / (1 + step))", "pass"), UNPROVEN) == []


def test_lr_of_a_plain_dict_is_not_a_param_group():
    src = KERNEL + "cfg = {'lr': 0.1}\nw = torch.randn(4)\nfor step in range(5):\n    cfg['lr'] = 0.1 / (1 + step)\n    kernel(w, w, cfg['lr'])\n"
    assert _lines(src, UNPROVEN) == []


def test_getattr_multiplier_written_as_a_tensor_is_not_a_float():
    lr = "group['lr'] * getattr(p, 'lr_mul', 1.0)"
    src = KERNEL + OPTIMIZER.format(lr=lr) + "for step in range(5):\n    for g in opt.param_groups:\n        g['lr'] = 0.1 / (1 + step)\n    opt.step()\n"
    assert _lines(src) == [14]
    assert _lines(src + "w.lr_mul = torch.ones(4)\n", UNPROVEN) == []


def test_param_default_needs_callers_passing_other_values():
    head = KERNEL + "def run(x, scale=0.5):\n    kernel(x, x, scale)\n\nx = torch.randn(4)\n"
    assert _lines(head + "run(x)\nrun(x)\n") == []  # the default, twice: the same value
    assert _lines(head + "run(x)\nrun(x)\n", UNPROVEN) == [8]
    assert _lines(head + "run(x)\nrun(x, scale=0.25)\n") == [8]
    assert _lines(head + "for s in (0.1, 0.2):\n    run(x, s)\n") == [8]


def test_param_default_annotated_otherwise_is_not_a_float():
    src = KERNEL + "def run(x, scale: torch.Tensor = 0.5):\n    kernel(x, x, scale)\n\nx = torch.randn(4)\nrun(x)\nrun(x, scale=0.25)\n"
    assert _lines(src, UNPROVEN) == []


def test_kwargs_forwarder_finding_is_on_the_origin():
    src = (
        KERNEL.replace("def kernel(p, grad, lr)", "def kernel(p, grad, **kw)").replace("grad * lr", "grad * kw['lr']")
        + "def outer(p, **kw):\n    return kernel(p, p, **kw)\n\n"
        "x = torch.randn(4)\nfor step in range(4):\n    outer(x, lr=0.1 * step)\n"
    )
    found = _run(src)
    assert [f.line for f in found] == [12]
    assert "through `outer`" in found[0].message
    # the compiled function reads `kw['lr']` itself, not through a parameter: unsafe
    assert found[0].fix.safety is Safety.UNSAFE


def test_forwarder_that_reads_what_it_forwards_makes_the_fix_unsafe():
    src = KERNEL + "def outer(p, *args):\n    if args[0] > 0.5:\n        pass\n    return kernel(p, *args)\n\nx = torch.randn(4)\nfor step in range(4):\n    outer(x, x, 0.1 * step)\n"
    found = _run(src)
    assert [f.line for f in found] == [14]
    assert found[0].fix.safety is Safety.UNSAFE and "`outer` reads `args`" in found[0].message


def test_star_args_forwarder_maps_positions():
    """`outer(p, *args)` -> `kernel(p, *args)`: the second argument of outer
    is `grad`, the third `lr` (only that one is a float)."""
    src = KERNEL + "def outer(p, *args):\n    return kernel(p, *args)\n\nx = torch.randn(4)\nfor step in range(4):\n    outer(x, x, 0.1 * step)\n"
    found = _run(src)
    assert [(f.line, f.column) for f in found] == [(12, 17)]
    assert found[0].fix.safety is Safety.SAFE


def test_function_passed_in_must_be_the_compiled_one():
    src = KERNEL + "def plain(p, grad, lr):\n    p.sub_(grad * lr)\n\ndef run(fn, *args):\n    return fn(*args)\n\nx = torch.randn(4)\nfor step in range(4):\n    run(plain, x, x, 0.1 * step)\n"
    assert _lines(src, UNPROVEN) == []
    assert _lines(src.replace("run(plain,", "run(kernel,")) == [15]


# -- parameters followed to their callers; nn.Module calls; self attributes (forms of pos_returned_compiled, pos_bound_method_attr)

PLAIN = KERNEL + "def run(x, scale):\n    kernel(x, x, scale)\n\nx = torch.randn(4)\n"


def test_plain_parameter_is_what_every_call_passes():
    assert _lines(PLAIN + "for s in range(4):\n    run(x, 0.5 + s / 10)\n") == [8]
    found = _run(PLAIN + "for s in range(4):\n    run(x, 0.5 + s / 10)\n")
    assert "every call of `run` passes a float for `scale`" in found[0].message
    assert found[0].fix.safety is Safety.SAFE  # `x` is a float tensor at every call of `run`
    assert _lines(PLAIN + "run(x, 0.5)\n") == []  # one call, one value: no evidence
    assert _lines(PLAIN + "run(x, 0.5)\n", UNPROVEN) == [8]
    assert _lines(PLAIN + "run(x, 0.5)\nrun(x, 0.25)\n") == [8]  # different values


def test_plain_parameter_any_call_not_a_float_is_silent():
    assert _lines(PLAIN + "for s in range(4):\n    run(x, 0.5 + s / 10)\nrun(x, torch.tensor(0.5))\n", UNPROVEN) == []
    assert _lines(PLAIN + "for s in range(4):\n    run(x, s)\n", UNPROVEN) == []  # ints: automatic dynamic handles them
    assert _lines(PLAIN + "args = [x, 0.5]\nfor s in range(4):\n    run(x, 0.5 + s / 10)\nrun(*args)\n", UNPROVEN) == []


def test_plain_parameter_of_a_function_passed_around_is_silent():
    """`run` handed to other code: its other callers are not seen."""
    src = PLAIN + "for s in range(4):\n    run(x, 0.5 + s / 10)\nhooks = [run]\n"
    assert _lines(src, UNPROVEN) == []


def test_plain_parameter_followed_a_bounded_number_of_functions_out():
    def chain(n: int) -> str:
        src = KERNEL + "def f1(x, t):\n    kernel(x, x, t)\n\n"
        for k in range(2, n + 1):
            src += f"def f{k}(x, t):\n    f{k - 1}(x, t)\n\n"
        return src + f"x = torch.randn(4)\nfor s in range(4):\n    f{n}(x, 0.5 + s / 10)\n"

    assert _lines(chain(3)) == [8]
    assert _lines(chain(4), UNPROVEN) == []
    # an uncalled function passing an unknown value is a caller too
    assert _lines(chain(2) + "def g(x, t):\n    f1(x, t)\n", UNPROVEN) == []


LOSS = (
    "import torch\nimport torch.nn.functional as F\n\n\n"
    "class Loss(torch.nn.Module):\n"
    "    def __init__(self, warmup=10):\n"
    "        super().__init__()\n"
    "        self.warmup = warmup\n"
    "        self.fn = torch.compile(self._loss)\n\n"
    "    def _loss(self, logits, labels, weight):\n"
    "        return F.cross_entropy(logits, labels) * weight\n\n"
    "    def forward(self, logits, labels, step):\n"
    "        weight = min(1.0, step / self.warmup)\n"
    "        return self.fn(logits, labels, weight)\n\n\n"
    "loss_mod = Loss()\nlogits = torch.randn(4, 6)\nlabels = torch.tensor([0, 1, 2, 3])\n"
)


def test_module_call_reaches_forward_and_true_division_is_a_float():
    src = LOSS + "for step in range(1, 11):\n    loss_mod(logits, labels, step)\n"
    found = _run(src)
    assert [f.line for f in found] == [16]
    assert found[0].fix.safety is Safety.SAFE
    assert _lines(LOSS + "loss_mod(logits, labels, 3)\n") == []  # one call: no evidence
    assert _lines(LOSS + "loss_mod(logits, labels, 3)\n", UNPROVEN) == [16]


def test_division_of_something_not_a_number_is_not_a_float():
    """`step / self.warmup` is a Python float only when both are numbers: a
    tensor step, or a warm-up attribute also given a tensor, is not."""
    loop = "for step in range(1, 11):\n    loss_mod(logits, labels, {})\n"
    assert _lines(LOSS + loop.format("torch.tensor(step)"), UNPROVEN) == []
    assert _lines(LOSS + loop.format("step") + "loss_mod.warmup = torch.tensor(5.0)\n", UNPROVEN) == []
    unknown = LOSS.replace("self.warmup = warmup", "self.warmup = cfg.warmup")
    assert _lines(unknown + loop.format("step"), UNPROVEN) == []


def test_module_instance_of_another_class_is_not_a_caller():
    other = "class Other(torch.nn.Module):\n    def forward(self, logits, labels, step):\n        return logits\n\n\nplain = Other()\n"
    src = LOSS + other + "for step in range(1, 11):\n    plain(logits, labels, step)\nloss_mod(logits, labels, 3)\n"
    assert _lines(src) == []  # the varying step goes to Other, not to Loss
# -- the flow forms meet the safety judgements (tensor-ops table, no-fix kinds)


def _method_kernel(body: str) -> str:
    return "import torch\n\n@torch.compile\ndef kernel(p, c):\n    " + body + "\n\nfor step in range(4):\n    kernel({p}, 0.1 * step)\n"


def test_tensor_method_is_the_table_row():
    """`p.mul_(c)` is the table's `mul` row (`other` slot, the receiver the
    operand): safe on a floating receiver, unsafe on an integer one or with a
    keyword the row does not prove (`alpha=`)."""
    floating = _method_kernel("p.mul_(c)").format(p="torch.randn(4)")
    assert [f.fix.safety for f in _run(floating)] == [Safety.SAFE]
    integer = _method_kernel("p.mul_(c)").format(p="torch.arange(4)")
    assert [f.fix.safety for f in _run(integer)] == [Safety.UNSAFE]
    alpha = _method_kernel("p.add_(p, alpha=c)").format(p="torch.randn(4)")
    assert [f.fix.safety for f in _run(alpha)] == [Safety.UNSAFE]


def test_tensor_method_result_is_as_wide_as_its_operands():
    """`g.add(b, alpha=m)` is as floating as `g` and `b` (the arithmetic rows
    keep the promoted dtype), so `u * c` meets a floating tensor."""
    src = _method_kernel("u = p.add(p.sign(), alpha=0.9)\n    p.sub_(u * c)").format(p="torch.randn(4)")
    assert [f.fix.safety for f in _run(src)] == [Safety.SAFE]
    src = _method_kernel("u = p.add(p.sign(), out=p)\n    p.sub_(u * c)").format(p="torch.randn(4)")
    assert [f.fix.safety for f in _run(src)] == [Safety.UNSAFE]


def test_kwargs_passed_on_keep_the_no_fix_kinds():
    """A float landing in the compiled function's `**kwargs` and passed on to
    a helper that branches on it (fullgraph=True) or hands it to dropout gets
    no fix, as when passed by name."""
    branch = (
        "import torch\n\ndef sample(x, temperature=1.0):\n    if temperature > 0.0:\n        return x / temperature\n    return x\n\n"
        "@torch.compile(fullgraph=True)\ndef decode(x, **kw):\n    return sample(x, **kw)\n\n"
        "for t in (0.5, 0.7):\n    decode(torch.randn(4), temperature=t)\n"
    )
    found = _run(branch)
    assert len(found) == 1 and found[0].fix is None and "fullgraph=True refuses" in found[0].message
    assert _run(branch.replace("fullgraph=True", "dynamic=False"))[0].fix.safety is Safety.UNSAFE
    dropout = (
        "import torch\nimport torch.nn.functional as F\n\ndef drop(x, p):\n    return F.dropout(x, p=p)\n\n"
        "@torch.compile\ndef step(x, **kw):\n    return drop(x, **kw)\n\n"
        "for p in (0.1, 0.2):\n    step(torch.randn(4), p=p)\n"
    )
    found = _run(dropout)
    assert len(found) == 1 and found[0].fix is None and "dropout" in found[0].message


def test_kwargs_passed_on_to_a_method_says_it_is_not_followed():
    """`**kwargs` handed on to `self.sample(...)` is passed on, not read: the
    reason names the call the analysis does not follow (it said "read other
    than passed on"); the fix stays unsafe.  Only a true read says read."""
    src = (
        "import torch\n\n"
        "class Gen:\n"
        "    def __init__(self):\n"
        "        self.decode = torch.compile(self.decode, fullgraph=True)\n\n"
        "    def decode(self, x, **sampling_kwargs):\n"
        "        return self.sample(x, **sampling_kwargs)\n\n"
        "    def sample(self, x, temperature: float = 1.0):\n"
        "        return x / max(temperature, 1e-5)\n\n"
        "    def run(self):\n"
        "        for i in range(1, 12):\n"
        "            self.decode(torch.ones(4), temperature=0.1 * i)\n\n"
        "Gen().run()\n"
    )
    found = _run(src, UNPROVEN)
    assert len(found) == 1 and found[0].fix.safety is Safety.UNSAFE
    assert "`sampling_kwargs` is passed on to `self.sample()`, which this analysis does not follow (line 8)" in found[0].message
    read = src.replace("return self.sample(x, **sampling_kwargs)", "print(sampling_kwargs)\n        return x")
    found = _run(read, UNPROVEN)
    assert len(found) == 1 and "`sampling_kwargs` is read other than passed on (line 8)" in found[0].message


UNPACKED = (
    "import torch\n\n"
    "class Opt:\n"
    "    def __init__(self, compile_step):\n"
    "        self._step = torch.compile(self._impl) if compile_step else self._impl\n\n"
    "    def _impl(self, x, coeff):\n"
    "        x.mul_(1 - coeff)\n\n"
    "    def _coeffs(self, t){returns}:\n"
    "        return 0.5, 1.0 - (t / (t + 1)).item()\n\n"
    "    def step(self, x, steps):\n"
    "        for t in steps:\n"
    "            train, coeff = self._coeffs(t)\n"
    "            self._step(x, coeff)\n"
)


def test_a_float_unpacked_from_an_annotated_call_is_reported_with_unproven_only():
    # Distributed Shampoo before 5a873db: `train, eval = self._get_..._coeffs(...)`,
    # `-> tuple[float, float]`, into the compiled per-group step (a compile inside a
    # conditional expression binds `self._step`); being unpacked again in the loop
    # is no evidence that the call returns another value
    src = UNPACKED.format(returns=" -> tuple[float, float]")
    assert _run(src) == []
    [f] = _run(src, UNPROVEN)
    assert f.line == 16 and "`coeff` is unpacked from `_coeffs()`, annotated to return a float there" in f.message
    assert "(no call seen passing a changing value: reported with --unproven)" in f.message


def test_not_without_the_annotation_or_with_another_type_there():
    assert _run(UNPACKED.format(returns=""), UNPROVEN) == []
    assert _run(UNPACKED.format(returns=" -> tuple[float, torch.Tensor]"), UNPROVEN) == []
    assert _run(UNPACKED.format(returns=" -> tuple[float]"), UNPROVEN) == []  # not one place per name
