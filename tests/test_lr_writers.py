"""FR004 across modules: lr writers of another module (project index).

An optimizer stepped in a compiled region and passed to a scheduler or
``set_lr`` helper of another module: the writer's ``group["lr"] = v`` becomes
``.fill_`` and the constructor's fix is safe only when the index proves that
every optimizer reaching the writer, from every file of the run, gets a tensor
lr from plain --fix. (The runtime cure of the proven form is
tests/realworld/pos_lr_field_scheduler.)"""

from __future__ import annotations

import os
import textwrap
from typing import Dict

from codemods.analysis.context import Settings
from codemods.findings import Safety
from codemods.pipeline.runner import run

MAIN = """
import torch
from scheduler import WarmupScheduler

model = torch.nn.Linear(4, 4)
opt = torch.optim.Adam(model.parameters(), lr=0.1)
sched = WarmupScheduler(opt, base_lr=0.1, warmup=8{extra})


@torch.compile(backend="eager")
def train_step(x):
    model(x).sum().backward()
    opt.step()
    opt.zero_grad()
"""

SCHEDULER = """
class WarmupScheduler:
    def __init__(self, optimizer, base_lr, warmup, lr_field="lr"):
        self.optimizer = optimizer
        self.base_lr = base_lr
        self.warmup = warmup
        self.lr_field = lr_field
        self.n = 0{init}

    def step(self):
        self.n += 1
        for group in self.optimizer.param_groups:
            group[self.lr_field] = self.base_lr * min(1.0, self.n / self.warmup)
"""


def run_files(tmp_path, files: Dict[str, str], settings: Settings = Settings(), jobs: int = 1, cache_dir=None):
    """Write ``files`` (name -> dedented text) into ``tmp_path``, run the
    tool over them as a project, and return its results by file name."""
    for name, text in files.items():
        (tmp_path / name).write_text(textwrap.dedent(text).lstrip())
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        outcome = run(["."], settings, jobs=jobs, cache_dir=cache_dir)
    finally:
        os.chdir(cwd)
    assert not outcome.errors, outcome.errors
    return {os.path.basename(r.display_path): r for r in outcome.results}


def _project(tmp_path, files: Dict[str, str], jobs: int = 1, cache_dir=None):
    results = run_files(tmp_path, files, jobs=jobs, cache_dir=cache_dir)
    return {name: ([(f.line, f.fix.safety if f.fix else None) for f in r.findings], r.new) for name, r in results.items()}


def _safety(found, name):
    return [safety for _, safety in found.get(name, ([], None))[0]]


def _aware(found, name) -> bool:
    """Did ``name``'s lr write become tensor-aware (``.fill_`` only when the
    lr is a tensor)?"""
    new = found[name][1] or b""
    return b'isinstance(' in new and b'].fill_(' in new and b"import torch" in new


def test_scheduler_class_with_computed_key_is_proven(tmp_path):
    found = _project(tmp_path, {"main.py": MAIN.format(extra=""), "scheduler.py": SCHEDULER.format(init="")})
    assert _safety(found, "main.py") == [Safety.SAFE]
    assert _safety(found, "scheduler.py") == [Safety.SAFE]
    assert b"group[self.lr_field].fill_(self.base_lr" in found["scheduler.py"][1]
    assert b"lr=torch.tensor(0.1)" in found["main.py"][1]


def test_same_in_a_pool_and_from_the_cache(tmp_path):
    files = {"main.py": MAIN.format(extra=""), "scheduler.py": SCHEDULER.format(init="")}
    for n in range(3):  # enough files for the pool
        files[f"other{n}.py"] = "import torch\nx = torch.zeros(1)\n"
    cache = str(tmp_path / ".cache")
    for _ in range(2):  # cold, then warm
        found = _project(tmp_path, files, jobs=2, cache_dir=cache)
        assert _safety(found, "scheduler.py") == [Safety.SAFE] and _safety(found, "main.py") == [Safety.SAFE]
    assert found["scheduler.py"][1].count(b".fill_(") == 1 and b"isinstance(" not in found["scheduler.py"][1]
    # a new file hands the scheduler an optimizer stepped eagerly: `.fill_`
    # would fail on its float, so the write becomes tensor-aware instead
    files["eager.py"] = "import torch\nfrom scheduler import WarmupScheduler\nm = torch.nn.Linear(2, 2)\ns = WarmupScheduler(torch.optim.SGD(m.parameters(), lr=0.1), 0.1, 4)\n"
    found = _project(tmp_path, files, jobs=2, cache_dir=cache)
    assert _safety(found, "scheduler.py") == [Safety.SAFE] and _safety(found, "main.py") == [Safety.SAFE]
    assert _aware(found, "scheduler.py")


def test_a_caller_that_overrides_the_key_is_not_proven(tmp_path):
    found = _project(tmp_path, {"main.py": MAIN.format(extra=', lr_field="learning_rate"'), "scheduler.py": SCHEDULER.format(init="")})
    assert _safety(found, "scheduler.py") == []
    assert _safety(found, "main.py") == [Safety.UNSAFE]


def test_a_writer_that_reads_the_lr_back_is_not_proven(tmp_path):
    # `base_lrs` would hold the very tensors `.fill_` then changes; the writer
    # still changes the lr: main.py keeps its default finding, with an unsafe fix
    init = "\n        self.base_lrs = [g['lr'] for g in optimizer.param_groups]"
    found = _project(tmp_path, {"main.py": MAIN.format(extra=""), "scheduler.py": SCHEDULER.format(init=init)})
    assert _safety(found, "scheduler.py") == []
    assert _safety(found, "main.py") == [Safety.UNSAFE]


def test_a_subclass_in_another_module_gets_a_tensor_aware_write(tmp_path):
    """A subclass may be given optimizers the index has not seen: the
    write is not proven for `.fill_`, but a tensor-aware one keeps their
    float lrs floats."""
    sub = "from scheduler import WarmupScheduler\n\nclass Slow(WarmupScheduler):\n    pass\n"
    found = _project(tmp_path, {"main.py": MAIN.format(extra=""), "scheduler.py": SCHEDULER.format(init=""), "slow.py": sub})
    assert _safety(found, "scheduler.py") == [Safety.SAFE] and _aware(found, "scheduler.py")
    assert _safety(found, "main.py") == [Safety.SAFE]


def test_optimizer_also_passed_to_unknown_code_is_not_proven(tmp_path):
    """The constructor's fix stays unsafe (`watch` may write a float lr);
    the writer's tensor-aware write is safe on its own (a float stays a
    float)."""
    main = MAIN.format(extra="") + "\nfrom tracking import watch\nwatch(opt)\n"
    found = _project(tmp_path, {"main.py": main, "scheduler.py": SCHEDULER.format(init=""), "tracking.py": "def watch(o):\n    pass\n"})
    assert _safety(found, "scheduler.py") == [Safety.SAFE] and _aware(found, "scheduler.py")
    assert _safety(found, "main.py") == [Safety.UNSAFE]


def test_set_lr_helper_of_another_module(tmp_path):
    main = """
    import torch
    import lr_utils

    model = torch.nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)


    @torch.compile(backend="eager")
    def train_step(x):
        model(x).sum().backward()
        opt.step()


    for i in range(4):
        train_step(torch.randn(2, 4))
        lr_utils.set_lr(opt, 0.1 / (i + 1))
    """
    helper = """
    def set_lr(optimizer, lr):
        for group in optimizer.param_groups:
            group["lr"] = lr
    """
    found = _project(tmp_path, {"main.py": main, "lr_utils.py": helper})
    assert _safety(found, "main.py") == [Safety.SAFE]
    assert _safety(found, "lr_utils.py") == [Safety.SAFE]
    assert b'group["lr"].fill_(lr)' in found["lr_utils.py"][1]


def test_writer_alone_or_caller_alone_stays_unproven(tmp_path):
    (tmp_path / "main.py").write_text(textwrap.dedent(MAIN.format(extra="")).lstrip())
    (tmp_path / "scheduler.py").write_text(textwrap.dedent(SCHEDULER.format(init="")).lstrip())
    # main.py alone: the optimizer goes to code not in the run, which may or
    # may not change its lr: no evidence, so reported only with --unproven
    for only, settings, expected in (
        ("scheduler.py", Settings(), []),
        ("main.py", Settings(), []),
        ("main.py", Settings(unproven=True), [Safety.UNSAFE]),
    ):
        outcome = run([str(tmp_path / only)], settings)
        assert [f.fix.safety if f.fix else None for f in outcome.findings] == expected


def test_caller_with_fr004_ignored_per_file_is_not_proven(tmp_path):
    # main.py's constructor would not be fixed: `.fill_` in scheduler.py would meet its float lr
    from codemods.pipeline.config import PerFileIgnores
    from codemods.pipeline.selection import FileSelection

    for name, text in {"main.py": MAIN.format(extra=""), "scheduler.py": SCHEDULER.format(init="")}.items():
        (tmp_path / name).write_text(textwrap.dedent(text).lstrip())
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        outcome = run(["."], Settings(), selection=FileSelection(per_file_ignores=PerFileIgnores([("main.py", ["FR004"])], ".")))
    finally:
        os.chdir(cwd)
    assert outcome.findings == [] and not any(r.new for r in outcome.results)


def test_a_writer_is_parsed_only_when_an_optimizer_is_passed_to_its_module(tmp_path, monkeypatch):
    """A module that can hold no compile site but writes param_groups is
    parsed for its lr writers only when some file passes an optimizer to a
    callable of that module; its facts wait in the cache until then, and are
    kept there once computed."""
    from codemods.pipeline import index as project

    parsed = []
    real = project._file_later
    monkeypatch.setattr(project, "_file_later", lambda job: parsed.append(os.path.basename(job[0])) or real(job))
    cache = str(tmp_path / ".cache")
    unrelated = "def decay(optimizer):\n    for group in optimizer.param_groups:\n        group['lr'] = 0.5 * group['lr']\n"
    files = {"scheduler.py": SCHEDULER.format(init=""), "unrelated.py": unrelated, "other.py": "import torch\nx = torch.zeros(1)\n"}
    found = _project(tmp_path, files, cache_dir=cache)
    assert parsed == [] and found["scheduler.py"] == ([], None)
    files["main.py"] = MAIN.format(extra="")  # hands `opt` to scheduler.WarmupScheduler
    found = _project(tmp_path, files, cache_dir=cache)
    assert parsed == ["scheduler.py"]
    assert _safety(found, "scheduler.py") == [Safety.SAFE] and _safety(found, "main.py") == [Safety.SAFE]
    again = _project(tmp_path, files, cache_dir=cache)
    assert parsed == ["scheduler.py"] and again == found
    assert _project(tmp_path, files) == found  # no cache: the same



# -- an optimizer built by a factory of another module (issue 29 item 2) ------

MODEL = """
import torch


class GPT(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def configure_optimizers(self, weight_decay, learning_rate):
        groups = [{"params": [self.lin.weight], "weight_decay": weight_decay}, {"params": [self.lin.bias], "weight_decay": 0.0}]
        optimizer = torch.optim.AdamW(groups, lr=learning_rate)
        return optimizer
"""

TRAIN = """
import torch
from model import GPT

model = GPT()
optimizer = model.configure_optimizers(0.1, {lr})


@torch.compile
def opt_step():
    optimizer.step()


for it in range(4):
    for param_group in optimizer.param_groups:
        param_group["lr"] = 6e-4 * (it + 1) / 4
    model.lin(torch.ones(8)).sum().backward()
    opt_step()
{extra}"""


def test_factory_of_another_module_is_fixed_in_both_files(tmp_path):
    found = _project(tmp_path, {"model.py": MODEL, "train.py": TRAIN.format(lr="6e-4", extra="")})
    assert _safety(found, "model.py") == [Safety.SAFE] and _safety(found, "train.py") == [Safety.SAFE]
    assert b"lr=torch.tensor(learning_rate)" in found["model.py"][1]
    assert b'param_group["lr"].fill_(6e-4 * (it + 1) / 4)' in found["train.py"][1]


def test_factory_is_not_proven_when_a_user_reads_the_lr_back(tmp_path):
    # the lr read back would be a tensor: no fix in either file, the write is reported
    found = _project(tmp_path, {"model.py": MODEL, "train.py": TRAIN.format(lr="6e-4", extra='print(optimizer.param_groups[0]["lr"])\n')})
    assert _safety(found, "model.py") == [] and _safety(found, "train.py") == [None]
    assert found["model.py"][1] is None and found["train.py"][1] is None


def test_factory_is_not_proven_when_the_lr_passed_is_not_a_float(tmp_path):
    found = _project(tmp_path, {"model.py": MODEL, "train.py": TRAIN.format(lr="float(input())", extra="")})
    assert _safety(found, "model.py") == [] and _safety(found, "train.py") == [None]


def test_factory_is_not_proven_when_another_file_calls_it_unseen(tmp_path):
    # bench.py gets an optimizer from the factory in a form the index cannot follow
    bench = "from model import GPT\n\nclass Bench:\n    def __init__(self):\n        self.opt = GPT().configure_optimizers(0.1, 6e-4)\n"
    found = _project(tmp_path, {"model.py": MODEL, "train.py": TRAIN.format(lr="6e-4", extra=""), "bench.py": bench})
    assert _safety(found, "model.py") == [] and _safety(found, "train.py") == [None]


def test_factory_is_not_proven_when_its_fix_is_suppressed(tmp_path):
    # the constructor's fix would not be made: the user's `.fill_` would meet a float lr
    model = MODEL.replace("lr=learning_rate)", "lr=learning_rate)  # fix-recompiles: ignore[FR004]")
    found = _project(tmp_path, {"model.py": model, "train.py": TRAIN.format(lr="6e-4", extra="")})
    assert found["model.py"][1] is None and found["train.py"][1] is None


def test_factory_is_not_proven_when_a_helper_writes_some_lr(tmp_path):
    # `set_lr(o, v)` may write this optimizer's lr as a float: not every write becomes `.fill_`
    helper = "def set_lr(o, v):\n    for g in o.param_groups:\n        g['lr'] = v\n"
    found = _project(tmp_path, {"model.py": MODEL, "train.py": TRAIN.format(lr="6e-4", extra=helper)})
    assert found["model.py"][1] is None and found["train.py"][1] is None


# -- a schedule factory whose closure calls the module's writer (open_clip) ------------

#: open_clip's scheduler.py before 3650e7b, verbatim (the realworld twin's copy, its marker dropped)
with open(os.path.join(os.path.dirname(__file__), "realworld", "pos_cosine_lr_closure_cross_module", "scheduler.py"), encoding="utf-8") as _fh:
    OPEN_CLIP_SCHEDULER = _fh.read().replace("  # expect: FR004", "")

OPEN_CLIP_MAIN = """
import torch

from scheduler import cosine_lr

model = torch.nn.Linear(4, 4)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
scheduler = cosine_lr(optimizer, 1e-3, 2, 10)


@torch.compile(backend="eager")
def train_step(x):
    model(x).sum().backward()
    optimizer.step()
    optimizer.zero_grad()

{extra}
for step in range(10):
    scheduler(step)
    train_step(torch.randn(2, 4))
"""


def test_a_schedule_factory_of_another_module_is_followed_to_its_writer(tmp_path):
    """open_clip's `cosine_lr(optimizer, ...)` hands the optimizer to the
    closure it returns, which calls `assign_learning_rate(optimizer, lr)`:
    the factory is a writer of its module, proven like one, and the write
    it reaches becomes `.fill_` once, whichever factories lead there."""
    found = _project(tmp_path, {"main.py": OPEN_CLIP_MAIN.format(extra=""), "scheduler.py": OPEN_CLIP_SCHEDULER})
    assert _safety(found, "main.py") == [Safety.SAFE]
    assert _safety(found, "scheduler.py") == [Safety.SAFE]
    assert found["scheduler.py"][1].count(b'param_group["lr"].fill_(new_lr)') == 1
    assert b"lr=torch.tensor(1e-3)" in found["main.py"][1]


def test_a_tensor_aware_writer_behind_a_schedule_factory_leaves_only_the_constructor(tmp_path):
    """open_clip after 3650e7b: the writer fills a tensor lr and writes a
    float one; the optimizer passed to the factory then only needs a tensor
    lr, and the writer stays as it is."""
    aware = OPEN_CLIP_SCHEDULER.replace(
        'import math\n',
        'import math\n\nimport torch\n',
    ).replace(
        '        param_group["lr"] = new_lr\n',
        '        lr = param_group["lr"]\n        if isinstance(lr, torch.Tensor):\n            lr.fill_(new_lr)\n        else:\n            param_group["lr"] = new_lr\n',
    )
    found = _project(tmp_path, {"main.py": OPEN_CLIP_MAIN.format(extra=""), "scheduler.py": aware})
    assert _safety(found, "main.py") == [Safety.SAFE]
    assert _safety(found, "scheduler.py") == [] and found["scheduler.py"][1] is None


def test_a_schedule_factory_whose_writer_another_file_calls_gets_a_tensor_aware_write(tmp_path):
    """An eager optimizer handed straight to `assign_learning_rate` keeps a
    float lr: the `.fill_` the factory's proof would write would fail on it."""
    other = """
    import torch

    from scheduler import assign_learning_rate

    head = torch.nn.Linear(4, 1)
    eager = torch.optim.SGD(head.parameters(), lr=0.1)
    assign_learning_rate(eager, 0.05)
    """
    found = _project(tmp_path, {"main.py": OPEN_CLIP_MAIN.format(extra=""), "scheduler.py": OPEN_CLIP_SCHEDULER, "other.py": other})
    assert _safety(found, "scheduler.py") == [Safety.SAFE] and _aware(found, "scheduler.py")  # tensor-aware instead
    assert _safety(found, "main.py") == [Safety.SAFE]


def test_a_schedule_factory_given_an_eager_optimizer_too_gets_a_tensor_aware_write(tmp_path):
    """Another factory of the same writer given an optimizer stepped eagerly
    (float lr): the shared write cannot become `.fill_`."""
    extra = """
    head = torch.nn.Linear(4, 1)
    eager = torch.optim.SGD(head.parameters(), lr=0.1)
    from scheduler import const_lr
    warm = const_lr(eager, 0.1, 2, 10)
    warm(0)
    eager.step()
    """
    found = _project(tmp_path, {"main.py": OPEN_CLIP_MAIN.format(extra=textwrap.dedent(extra)), "scheduler.py": OPEN_CLIP_SCHEDULER})
    assert _safety(found, "scheduler.py") == [Safety.SAFE] and _aware(found, "scheduler.py")  # tensor-aware instead
    assert _safety(found, "main.py") == [Safety.SAFE]


def test_a_factory_that_also_reads_the_optimizer_is_no_forwarder(tmp_path):
    """`cosine_lr` that also hands the optimizer elsewhere (`print`) is no
    forwarder: it is no lr writer, so nothing is proven, and nothing shows
    the lr changes either (default: quiet)."""
    reads = OPEN_CLIP_SCHEDULER.replace(
        "def cosine_lr(optimizer, base_lr, warmup_length, steps):\n",
        "def cosine_lr(optimizer, base_lr, warmup_length, steps):\n    print(optimizer)\n",
    )
    found = _project(tmp_path, {"main.py": OPEN_CLIP_MAIN.format(extra=""), "scheduler.py": reads})
    assert _safety(found, "scheduler.py") == []
    assert _safety(found, "main.py") == []


# -- a helper that makes the lr a tensor (open_clip's tensorize_learning_rate) ----------

TENSORIZE = """

def tensorize_learning_rate(optimizer, device):
    for param_group in optimizer.param_groups:
        lr = param_group["lr"]
        if isinstance(lr, torch.Tensor):
            lr = lr.detach().to(device=device)
        else:
            lr = torch.tensor(float(lr), device=device)
        param_group["lr"] = lr
"""


def _tensorized_main(target: str) -> str:
    main = OPEN_CLIP_MAIN.format(extra="").replace("from scheduler import cosine_lr\n", "from scheduler import cosine_lr, tensorize_learning_rate\n")
    return main.replace("scheduler = cosine_lr(", f"other = torch.optim.SGD(model.parameters(), lr=0.1)\ntensorize_learning_rate({target}, torch.device('cpu'))\nscheduler = cosine_lr(")


def test_an_optimizer_handed_to_a_tensorizer_of_another_module_has_no_float_lr(tmp_path):
    """open_clip's own cure (3650e7b): `tensorize_learning_rate(optimizer,
    device)` right after the constructor makes every group's lr a tensor, so
    there is nothing to report, and the helper is no lr writer (no evidence,
    no `.fill_`)."""
    aware = OPEN_CLIP_SCHEDULER.replace("import math\n", "import math\n\nimport torch\n").replace(
        '        param_group["lr"] = new_lr\n',
        '        lr = param_group["lr"]\n        if isinstance(lr, torch.Tensor):\n            lr.fill_(new_lr)\n        else:\n            param_group["lr"] = new_lr\n',
    )
    found = _project(tmp_path, {"main.py": _tensorized_main("optimizer"), "scheduler.py": aware + TENSORIZE})
    assert _safety(found, "main.py") == [] and _safety(found, "scheduler.py") == []


def test_a_tensorized_lr_that_a_float_write_replaces_is_still_found(tmp_path):
    """Tensorized, then handed to a schedule whose helper writes a float
    (not tensor-aware): the float replaces the tensor, so the finding stays,
    and the cure is the helper's `.fill_`."""
    scheduler = OPEN_CLIP_SCHEDULER.replace("import math\n", "import math\n\nimport torch\n") + TENSORIZE
    found = _project(tmp_path, {"main.py": _tensorized_main("optimizer"), "scheduler.py": scheduler})
    assert _safety(found, "main.py") != []


def test_a_tensorizer_given_another_optimizer_changes_nothing(tmp_path):
    """The helper made another optimizer's lr a tensor: the compiled one's is
    still a float that the schedule changes."""
    scheduler = OPEN_CLIP_SCHEDULER.replace("import math\n", "import math\n\nimport torch\n") + TENSORIZE
    found = _project(tmp_path, {"main.py": _tensorized_main("other"), "scheduler.py": scheduler})
    assert Safety.SAFE in _safety(found, "main.py") or Safety.UNSAFE in _safety(found, "main.py")


def test_a_helper_that_may_write_a_float_is_no_tensorizer(tmp_path):
    """Without the else branch the name may still hold the float it read:
    the helper writes a float there, so it makes nothing a tensor."""
    partial = TENSORIZE.replace("        else:\n            lr = torch.tensor(float(lr), device=device)\n", "")
    scheduler = OPEN_CLIP_SCHEDULER.replace("import math\n", "import math\n\nimport torch\n") + partial
    found = _project(tmp_path, {"main.py": _tensorized_main("optimizer"), "scheduler.py": scheduler})
    assert _safety(found, "main.py") != []


# -- an optimizer stepped compiled by a training loop of another module ------------------

LOOP = """
import torch


def make_train_step(model, optimizer):
    def train_step(batch):
        optimizer.zero_grad()
        loss = model(batch).pow(2).mean()
        loss.backward()
        optimizer.step()
        return loss

    return train_step


def train(model, optimizer, scheduler, batches):
    step_fn = {compile}(make_train_step(model, optimizer))
    for batch in batches:
        scheduler.step(){extra}
        step_fn(batch)
"""

LOOP_MAIN = """
import torch

from loop import train

model = torch.nn.Linear(8, 1)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.9)
train(model, optimizer, scheduler, [torch.randn(4, 8) for _ in range(10)])
"""


def test_an_optimizer_stepped_compiled_by_a_loop_of_another_module_is_found(tmp_path):
    """`train(model, optimizer, ...)` of another module hands the optimizer to
    a factory whose returned closure is compiled and steps it: the optimizer
    is stepped inside a compiled region, and, the loop doing nothing else
    with it, the constructor's fix is safe."""
    found = _project(tmp_path, {"main.py": LOOP_MAIN, "loop.py": LOOP.format(compile="torch.compile", extra="")})
    assert _safety(found, "main.py") == [Safety.SAFE]
    assert b"lr=torch.tensor(1e-3)" in found["main.py"][1]


def test_a_loop_that_also_reads_the_lr_makes_the_fix_unsafe(tmp_path):
    extra = "\n        print(optimizer.param_groups[0]['lr'])"
    found = _project(tmp_path, {"main.py": LOOP_MAIN, "loop.py": LOOP.format(compile="torch.compile", extra=extra)})
    assert _safety(found, "main.py") == [Safety.UNSAFE]


def test_a_loop_that_steps_eagerly_is_no_stepper(tmp_path):
    found = _project(tmp_path, {"main.py": LOOP_MAIN, "loop.py": LOOP.format(compile="", extra="")})
    assert _safety(found, "main.py") == []


def test_an_optimizer_held_by_a_dataclass_field_is_followed(tmp_path):
    """open_clip's tree: the optimizer goes into `TrainState(optimizer=...)`,
    `train_one_epoch(state)` compiles `_make_train_step(state.optimizer)`:
    found; the fix stays unsafe (the dataclass is other code that holds it)."""
    loop = """
    from dataclasses import dataclass
    from typing import Any, Optional

    import torch


    @dataclass
    class TrainState:
        task: Any
        optimizer: Optional[torch.optim.Optimizer] = None
        scheduler: Any = None


    def _make_train_step(task, optimizer):
        def train_step(batch):
            optimizer.zero_grad()
            task(batch).sum().backward()
            optimizer.step()

        return train_step


    def train_one_epoch(state, batches):
        train_step = torch.compile(_make_train_step(state.task, state.optimizer))
        for i, batch in enumerate(batches):
            state.scheduler.step()
            train_step(batch)
    """
    main = """
    import torch

    from loop import TrainState, train_one_epoch

    task = torch.nn.Linear(8, 1)
    optimizer = torch.optim.AdamW(task.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.9)
    state = TrainState(task=task, optimizer=optimizer, scheduler=scheduler)
    train_one_epoch(state, [torch.randn(4, 8) for _ in range(10)])
    """
    found = _project(tmp_path, {"main.py": main, "loop.py": loop})
    assert _safety(found, "main.py") == [Safety.UNSAFE]
    other = main.replace("state = TrainState(task=task, optimizer=optimizer, scheduler=scheduler)", "state = TrainState(task=task, scheduler=scheduler)")
    assert _safety(_project(tmp_path, {"main.py": other, "loop.py": loop}), "main.py") == []


def test_a_loop_handing_the_optimizer_to_a_factory_that_uses_it_otherwise_is_not_clean(tmp_path):
    """`train` only hands the optimizer on, but the factory it hands it to
    also hands it to other code (`print`): the chain is not clean, the fix
    unsafe."""
    loop = LOOP.format(compile="torch.compile", extra="").replace(
        "    def train_step(batch):\n", "    print(optimizer)\n\n    def train_step(batch):\n"
    )
    found = _project(tmp_path, {"main.py": LOOP_MAIN, "loop.py": loop})
    assert _safety(found, "main.py") == [Safety.UNSAFE]


STEPPED_ELSEWHERE_MAIN = """
import torch

from loop import train
from scheduler import cosine_lr

model = torch.nn.Linear(8, 1)
optimizer = torch.optim.AdamW(model.parameters(), lr={lr})
scheduler = cosine_lr(optimizer, 1e-3, 2, 10)
train(model, optimizer, scheduler, [torch.randn(4, 8) for _ in range(10)])
"""


def _stepped_elsewhere(tmp_path, lr: str = "1e-3", compile: str = "torch.compile", unsafe: bool = False, extra: Dict[str, str] = {}):
    loop = LOOP.format(compile=compile, extra="").replace("scheduler.step()", "scheduler(0)")
    files = {"main.py": STEPPED_ELSEWHERE_MAIN.format(lr=lr), "loop.py": loop, "scheduler.py": OPEN_CLIP_SCHEDULER, **extra}
    return run_files(tmp_path, files, Settings(unsafe_fixes=unsafe))


def test_a_writer_given_an_optimizer_stepped_by_a_loop_of_another_module_fills_only_with_unsafe_fixes(tmp_path):
    """open_clip's tree: main.py (no compile site) builds the AdamW, hands it
    to `cosine_lr` (whose closure writes its lr) and to a training loop of
    another module that steps it compiled.  The writer's `.fill_` holds
    only if main.py's constructor gets its tensor lr, which the index cannot
    prove safe for a module it did not see stepping it: both halves are
    unsafe, applied together with --unsafe-fixes and neither without (a
    `.fill_` on a float lr would crash)."""
    plain = _stepped_elsewhere(tmp_path)
    assert [f.fix.safety for f in plain["main.py"].findings if f.fix] == [Safety.UNSAFE]
    assert [f.fix.safety for f in plain["scheduler.py"].findings if f.fix] == [Safety.UNSAFE]
    assert not plain["main.py"].changed and not plain["scheduler.py"].changed
    both = _stepped_elsewhere(tmp_path, unsafe=True)
    assert b"lr=torch.tensor(1e-3)" in both["main.py"].new
    assert both["scheduler.py"].new.count(b'param_group["lr"].fill_(new_lr)') == 1


def test_a_writer_given_an_optimizer_no_module_steps_compiled_is_not_proven(tmp_path):
    """The same, the loop stepping eagerly: nothing steps main.py's
    optimizer compiled, so nothing is found and the writer stays a float
    writer (a `.fill_` would crash on the float lr)."""
    found = _stepped_elsewhere(tmp_path, compile="", unsafe=True)
    assert not found["main.py"].findings and not found["scheduler.py"].findings


def test_a_writer_shared_with_an_unsafe_half_makes_the_safe_half_unsafe(tmp_path):
    """Another module steps its own optimizer compiled and hands it to the
    same writer: alone its fix would be safe; with main.py's optimizer,
    whose tensor lr comes only with --unsafe-fixes, the shared `.fill_` is
    unsafe, and so is its constructor's fix, which goes with it."""
    other = OPEN_CLIP_MAIN.format(extra="")
    found = _stepped_elsewhere(tmp_path, extra={"other.py": other})
    assert [f.fix.safety for f in found["other.py"].findings if f.fix] == [Safety.UNSAFE]
    assert [f.fix.safety for f in found["scheduler.py"].findings if f.fix] == [Safety.UNSAFE]
    assert not any(r.changed for r in found.values())
    alone = _project(tmp_path / "alone" if (tmp_path / "alone").mkdir() is None else tmp_path, {"main.py": other, "scheduler.py": OPEN_CLIP_SCHEDULER})
    assert _safety(alone, "main.py") == [Safety.SAFE] and _safety(alone, "scheduler.py") == [Safety.SAFE]


# an optimizer whose lr is a tensor already (DeepSpeed 407708cdb: the model
# script's choice) and a writer of another module that writes floats over it
TENSOR_MAIN = """
import torch
import lr_utils

model = torch.nn.Linear(4, 4)
opt = torch.optim.SGD({params}, lr=torch.tensor(0.1))


@torch.compile(backend="eager")
def train_step(x):
    model(x).sum().backward()
    opt.step()


for i in range(4):
    train_step(torch.randn(2, 4))
    lr_utils.set_lr(opt, 0.1 / (i + 1))
{extra}"""

SET_LR = """
def set_lr(optimizer, lr):
    for group in optimizer.param_groups:
        group["lr"] = lr
"""


def test_a_writer_given_an_optimizer_with_a_tensor_lr_already_fills(tmp_path):
    results = run_files(tmp_path, {"main.py": TENSOR_MAIN.format(params="model.parameters()", extra=""), "lr_utils.py": SET_LR})
    assert results["main.py"].findings == []
    (fill,) = results["lr_utils.py"].findings
    assert fill.fix.safety is Safety.SAFE and fill.fix.rests_on == ()
    assert b'group["lr"].fill_(lr)' in results["lr_utils.py"].new


def test_a_tensor_lr_in_groups_not_seen_is_no_proof(tmp_path):
    # groups built elsewhere may hold a float lr of their own
    main = TENSOR_MAIN.format(params="groups", extra="").replace("model = torch", "from cfg import groups\nmodel = torch")
    results = run_files(tmp_path, {"main.py": main, "lr_utils.py": SET_LR, "cfg.py": "groups = []\n"})
    assert all(f.fix is None for f in results["lr_utils.py"].findings)
    assert results["lr_utils.py"].new is None


def test_a_tensor_lr_also_handed_to_code_not_seen_gets_a_tensor_aware_write(tmp_path):
    # that code may write a float: the write keeps whichever it meets
    main = TENSOR_MAIN.format(params="model.parameters()", extra="import other\nother.schedule(opt)\n")
    found = _project(tmp_path, {"main.py": main, "lr_utils.py": SET_LR})
    assert _safety(found, "lr_utils.py") == [Safety.SAFE]
    assert _aware(found, "lr_utils.py")


def test_a_factory_whose_lr_is_a_tensor_already_lets_its_users_fill(tmp_path):
    model = MODEL.replace("lr=learning_rate", "lr=torch.tensor(learning_rate)")
    found = _project(tmp_path, {"model.py": model, "train.py": TRAIN.format(lr="6e-4", extra="")})
    assert _safety(found, "model.py") == [] and _safety(found, "train.py") == [Safety.SAFE]
    assert b'param_group["lr"].fill_(6e-4 * (it + 1) / 4)' in found["train.py"][1]


def test_a_float_written_where_the_analysis_cannot_follow_blocks_the_writers_fill(tmp_path):
    """main.py writes a float into a slice of its optimizer's groups (a form
    FR004 does not follow): lr_utils.set_lr's `.fill_` would meet it and
    crash, also with --unsafe-fixes (found running it). The writer is left
    alone; the constructor's fix stays (unsafe) and the program runs."""
    import subprocess
    import sys

    main = TENSOR_MAIN.format(params="model.parameters()", extra="").replace("lr=torch.tensor(0.1)", "lr=0.1").replace(
        "    lr_utils.set_lr(opt, 0.1 / (i + 1))\n",
        "    lr_utils.set_lr(opt, 0.1 / (i + 1))\n    if i == 0:\n        warm(opt.param_groups[:1], 0.01)\n",
    ) + "print('ok')\n"
    main = main.replace("\n\nfor i in range(4):", "\n\ndef warm(groups, v):\n    for g in groups:\n        g['lr'] = v\n\n\nfor i in range(4):")
    results = run_files(tmp_path, {"main.py": main, "lr_utils.py": SET_LR}, Settings(unsafe_fixes=True, unproven=True))
    assert results["lr_utils.py"].new is None
    assert [f.fix.safety for f in results["main.py"].findings if f.fix] == [Safety.UNSAFE]
    (tmp_path / "main.py").write_bytes(results["main.py"].new)
    done = subprocess.run([sys.executable, "main.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


# -- an optimizer that loads a saved state ------------------------------------
# torch's `Optimizer.load_state_dict` replaces each param group's lr by the
# saved one: a float, in a checkpoint written before the fix. A plain
# `g["lr"].fill_(v)` would crash on resume; a write reaching such an
# optimizer becomes tensor-aware (a float stays a float and recompiles as
# before; a tensor is filled).

RESUME = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden", "optimizer_scalars", "resume_checkpoint")


def _run(folder, script, out_dir):
    import subprocess
    import sys

    env = dict(os.environ, OUT_DIR=str(out_dir))
    done = subprocess.run([sys.executable, script], cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_resuming_from_a_checkpoint_written_before_the_fix(tmp_path):
    """The golden resume_checkpoint: the original run writes a checkpoint
    with a float lr; the fixed program resumes from it without crashing and
    prints what the original prints resuming from it; a checkpoint the fixed
    program writes (a tensor lr) resumes the same way."""
    import shutil

    before, after = tmp_path / "before", tmp_path / "after"
    for d in (before, after):
        d.mkdir()
    shutil.copy(RESUME + ".in.py", before / "train.py")
    shutil.copy(RESUME + ".out.py", after / "train.py")
    first = _run(before, "train.py", before)  # fresh, writes ckpt.pt (float lr)
    shutil.copy(before / "ckpt.pt", after / "ckpt.pt")
    resumed_before = _run(before, "train.py", before)
    resumed_after = _run(after, "train.py", after)
    assert resumed_after == resumed_before and resumed_after != first
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    assert _run(after, "train.py", fresh) == first  # writes a tensor-lr checkpoint
    assert _run(after, "train.py", fresh) == resumed_before


def test_a_writer_of_another_module_given_an_optimizer_that_loads_state_is_tensor_aware(tmp_path):
    main = MAIN.format(extra="").replace(
        "sched = WarmupScheduler",
        "if __import__('os').environ.get('RESUME'):\n    opt.load_state_dict(torch.load('ckpt.pt'))\nsched = WarmupScheduler",
    )
    found = _project(tmp_path, {"main.py": main, "scheduler.py": SCHEDULER.format(init="")})
    assert _safety(found, "main.py") == [Safety.SAFE]
    assert _safety(found, "scheduler.py") == [Safety.SAFE]
    assert _aware(found, "scheduler.py")
    assert b"lr=torch.tensor(0.1)" in found["main.py"][1]


def test_a_factory_user_that_loads_state_writes_tensor_aware(tmp_path):
    extra = "optimizer.load_state_dict(optimizer.state_dict())\n"
    found = _project(tmp_path, {"model.py": MODEL, "train.py": TRAIN.format(lr="6e-4", extra=extra)})
    assert _safety(found, "model.py") == [Safety.SAFE] and _safety(found, "train.py") == [Safety.SAFE]
    assert b"lr=torch.tensor(learning_rate)" in found["model.py"][1]
    assert _aware(found, "train.py")


def test_state_loaded_by_torch_distributed_checkpoint_counts(tmp_path):
    """`set_optimizer_state_dict(model, optimizer, sd)` loads the saved lr too."""
    main = MAIN.format(extra="").replace(
        "import torch\n",
        "import torch\nfrom torch.distributed.checkpoint.state_dict import set_optimizer_state_dict\n",
    ).replace("sched = WarmupScheduler", "set_optimizer_state_dict(model, opt, optim_state_dict={})\nsched = WarmupScheduler")
    found = _project(tmp_path, {"main.py": main, "scheduler.py": SCHEDULER.format(init="")})
    assert _aware(found, "scheduler.py")


def test_a_scheduler_handed_to_a_logger_of_another_module_makes_the_fix_unsafe(tmp_path):
    """HF-style logging: `log_metrics(step, loss, scheduler)` reads
    `scheduler.get_last_lr()` there and dumps it as JSON, which a tensor lr
    breaks (found by an audit: the SAFE fix crashed the run)."""
    main = (
        "import torch\nfrom utils import log_metrics\n\nmodel = torch.nn.Linear(4, 2)\n"
        "optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)\n"
        "scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)\n\n\n"
        "@torch.compile(backend=\"eager\")\ndef train_step(x):\n    model(x).sum().backward()\n    optimizer.step()\n    optimizer.zero_grad()\n\n\n"
        "for step in range(4):\n    train_step(torch.randn(2, 4))\n    scheduler.step()\n    log_metrics(step, scheduler)\n"
    )
    utils = "import json\n\n\ndef log_metrics(step, scheduler):\n    print(json.dumps({\"step\": step, \"lr\": scheduler.get_last_lr()[0]}))\n"
    found = _project(tmp_path, {"main.py": main, "utils.py": utils})
    assert _safety(found, "main.py") == [Safety.UNSAFE]
    found = _project(tmp_path, {"main.py": main.replace("    log_metrics(step, scheduler)\n", ""), "utils.py": utils})
    assert _safety(found, "main.py") == [Safety.SAFE]
