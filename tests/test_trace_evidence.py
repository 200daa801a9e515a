"""Issue 13, fixes made from the trace's evidence where no static finding
covers the failing guard: FR005's flag for int attributes of ``self`` (a
submodule's counter, per-instance layer indices of blocks compiled one by
one).  Unit tests read the trace recorded from ``tests/trace_scripts/
module_attrs.py`` under torch 2.13; the end-to-end test really runs it."""

from __future__ import annotations

import dataclasses
import re
import subprocess

import pytest
import warm_python
from test_trace import CLI, PYTHON, SCRIPTS, _env, copied, graphs, results, run_cli  # noqa: F401  (copied: a fixture)

from codemods.trace import read as tr
from codemods.modes import traced as traced_mode
from codemods.trace import cures as trace_cures
from codemods.trace import guide as trace_guide
from codemods.trace import match as trace_match
from codemods import transforms as transforms
from codemods.analysis.context import Settings
from codemods.findings import Safety

FLAG = "torch._dynamo.config.allow_unspec_int_on_nn_module = True"
#: target torch with the flag (FR005's FLAG_SINCE): the plain assignment
NEW = Settings(target_torch=(2, 13))


def test_flag_from_the_trace_where_no_static_finding_covers_it(copied):
    script, trace = copied("module_attrs")
    guided = trace_guide.guide(trace, NEW, [str(script.parent)], fixing=True)
    # FR005 sees neither the submodule's counter nor the blocks built in a comprehension
    assert not [m for m in guided.matches if m.finding.code == "FR005"]
    flagged = [m for m in guided.matches if m.finding.code == "TRACE"]
    assert sorted((m.entry.firstlineno, m.cause) for m in flagged) == [
        (18, tr.MODULE_INT_ATTR),
        (28, tr.MODULE_INT_ATTR),
    ]
    assert all(m.finding.applied and m.finding.fix.safety == Safety.SAFE for m in flagged)
    assert "module int attribute `self.kv_cache.size`" in flagged[0].finding.message
    assert "module int attribute `self.layer_idx`" in flagged[1].finding.message
    # two classes: one flag, right after `import torch` (before every compile of them)
    new = guided.files[0].new.decode()
    assert new.count("allow_unspec_int_on_nn_module") == 1
    assert f"import torch\n{FLAG}\n\n\nclass KVCache" in new
    # the train/eval recompile of Net (bounded) gets nothing
    assert not [m for m in guided.matches if m.entry.firstlineno == 37]


def test_one_class_gets_the_flag_before_its_compile():
    data = (SCRIPTS / "module_attrs.py").read_bytes()
    new, line = trace_cures.unspec_flag(data, [18], NEW)
    assert line == 45  # decoder.compile(backend="eager"): FR005's placement
    lines = new.decode().splitlines()
    assert lines[44:46] == [FLAG, 'decoder.compile(backend="eager")']
    # a second run finds the flag set and adds nothing
    assert trace_cures.unspec_flag(new, [18], NEW) == (None, 0)
    # an older target torch: FR005's rendering, behind hasattr
    old, _ = trace_cures.unspec_flag(data, [18], Settings())
    assert old.decode().splitlines()[44:47] == [
        'if hasattr(torch._dynamo.config, "allow_unspec_int_on_nn_module"):',
        "    " + FLAG,
        'decoder.compile(backend="eager")',
    ]


def test_no_flag_for_a_method_of_a_class_that_is_not_a_module():
    data = (
        b"import torch\nclass Cfg:\n    def __init__(self):\n        self.n = 0\n"
        b"    def step(self, x):\n        return x + self.n\n"
    )
    assert trace_cures.unspec_flag(data, [5], Settings()) == (None, 0)


@pytest.mark.parametrize(
    "reason,flagged",
    [
        ("0/0: L['self']._modules['kv_cache'].size == 0", ["self.kv_cache.size"]),
        ("0/0: L['self'].layer_idx == 1", ["self.layer_idx"]),
        # an int attribute of a plain argument: the flag is about nn.Module attributes
        ("0/0: L['cfg'].n == 3", []),
        # a float attribute: the flag does not cover floats
        ("0/0: L['self'].scale == 0.5", []),
    ],
)
def test_only_int_attributes_of_self_call_for_the_flag(reason, flagged):
    entry = tr.CodeEntry(name="forward", filename="m.py", firstlineno=1, reasons=tr.parse_reason(reason))
    assert trace_cures._module_int_sources(entry) == flagged


def test_run_fix_sets_the_flag_and_cures_recompiles(tmp_path):
    """Measured on 2.13: Decoder.forward 3 -> 2 graphs, Block.forward 4 -> 2,
    same printed result."""
    proc, script = run_cli(tmp_path, "module_attrs", "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    assert out.count("fixed: module_attrs.py:3:1: TRACE ") == 2, out
    before, after = graphs(out, "total")
    assert after < before, out
    first, second = results(out)
    assert first == second
    assert FLAG in script.read_text()
    assert "Exit code unchanged (0)." in out


# -- a library function compiled in user code ----------------------------------------


def _library_trace(tmp_path, monkeypatch, script_text=None):
    import shutil

    from test_trace import fixture_path

    from test_trace import compiles_library_functions

    if not compiles_library_functions():
        pytest.skip("this torch runs a torch function given to torch.compile eagerly (no compile to trace)")
    script = tmp_path / "library_fn.py"
    if script_text is None:
        shutil.copy(SCRIPTS / "library_fn.py", script)
    else:
        script.write_text(script_text)
    monkeypatch.chdir(tmp_path)
    return script, tr.read_trace(str(fixture_path("library_fn")))


def test_recorded_library_recompile_names_no_user_file():
    from test_trace import compiles_library_functions, fixture

    if not compiles_library_functions():
        pytest.skip("this torch runs a torch function given to torch.compile eagerly (no compile to trace)")

    [entry] = fixture("library_fn").entries
    # torch 2.13 compiles F.softmax through its wrap_inline wrapper
    assert (entry.name, entry.firstlineno, entry.graphs) == ("inner", 67, 6)
    assert entry.filename.replace("\\", "/").endswith("torch/_dynamo/external_utils.py")
    assert entry.user_frame is None
    assert trace_match.entry_file(entry) is None


def test_library_recompile_is_mapped_to_the_users_compile_call(tmp_path, monkeypatch):
    script, trace = _library_trace(tmp_path, monkeypatch)
    guided = trace_guide.guide(trace, Settings(), [str(tmp_path)], fixing=True)
    [entry] = trace.entries
    assert entry.library_site == (str(script), 8)
    assert tr.display_name(entry) == "F.softmax"
    [row] = tr.table_rows(trace, list(transforms.BY_CODE), relative_to=str(tmp_path))
    assert row[:5] == ["F.softmax", "library_fn.py:8", "6", "no", "tensor shape `args[0]`"]
    assert "maybe_mark_dynamic" not in row[5]  # `args[0]` is the wrapper's, not a name of the user's
    [m] = guided.matches
    assert m.finding.code == "FR001" and m.upgraded and m.finding.applied
    assert "`F.softmax` compiled 6 graphs on tensor shape `args[0]`" in m.finding.message
    assert b'softmax = torch.compile(F.softmax, backend="eager")\n' in guided.files[0].new


def test_two_library_compiles_leave_the_recompile_unmapped(tmp_path, monkeypatch):
    text = (SCRIPTS / "library_fn.py").read_text().replace(
        "\ntotal = 0.0", '\nrelu = torch.compile(F.relu, backend="eager", dynamic=False)\ntotal = 0.0'
    )
    _script, trace = _library_trace(tmp_path, monkeypatch, text)
    guided = trace_guide.guide(trace, Settings(), [str(tmp_path)], fixing=True)
    [entry] = trace.entries
    assert entry.library_site is None and entry.user_frame is None  # which one compiled it: unknown
    assert not guided.matches and not guided.files


def test_a_users_own_function_is_no_library_candidate(tmp_path, monkeypatch):
    text = "import torch\n\ndef f(x):\n    return x\n\nsoftmax = torch.compile(f, dynamic=False)\n"
    _script, trace = _library_trace(tmp_path, monkeypatch, text)
    from codemods.pipeline.selection import FileSelection

    trace_match.map_library_entries(trace, FileSelection().discover([str(tmp_path)]).files)
    assert trace.entries[0].library_site is None


def test_run_fix_cures_a_compiled_library_function(tmp_path):
    """Measured on 2.13: softmax over sizes 2..7 under dynamic=False, 6 -> 2
    graphs once `dynamic=False` is removed at the user's compile call."""
    from test_trace import compiles_library_functions

    if not compiles_library_functions():
        pytest.skip("this torch runs a torch function given to torch.compile eagerly (no compile to trace)")
    proc, script = run_cli(tmp_path, "library_fn", "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    assert "fixed: library_fn.py:8:" in out and " FR001 " in out
    before, after = graphs(out, "total")
    assert (before, after) == (6, 2), out
    first, second = results(out)
    assert first == second
    assert 'softmax = torch.compile(F.softmax, backend="eager")\n' in script.read_text()


# -- floats: where the value is passed in ----------------------------------------------
#
# tests/trace_scripts/forwarded_float.py: floats the source shows, passed in
# through forwarding functions (`generate(..., temperature=t)` -> `**kw`;
# `run_update(fn, *args)`); FR003 reports them where they are passed in, away
# from the compiled call, and the trace matches them by the compiled function
# they feed.  tests/trace_scripts/float_evidence.py: floats the source cannot
# show (read from JSON): the trace's guard is the evidence FR003 follows.


def _fr003(guided):
    return sorted(
        (m.finding.line, m.entry.name, m.finding.fix.safety if m.finding.fix else None)
        for m in guided.matches
        if m.finding.code == "FR003"
    )


def test_floats_passed_in_through_forwarders_match_the_compiled_function(copied):
    script, trace = copied("forwarded_float")
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    assert _fr003(guided) == [(39, "decode_one", Safety.SAFE), (41, "ema_update", Safety.SAFE)]
    new = guided.files[0].new.decode()
    assert "generate(weight, x, temperature=torch.tensor(temperature, dtype=torch.float64))" in new
    assert "run_update(ema_step, ema, param, torch.tensor(decay, dtype=torch.float64))" in new


def test_floats_only_the_trace_shows_are_wrapped_where_passed(copied):
    from codemods.pipeline.runner import run

    script, trace = copied("float_evidence")
    # the source alone shows no float (values read from JSON), even with --unproven
    assert not [f for f in run([str(script)], Settings(unproven=True)).findings if f.code == "FR003"]
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    # **kwargs key and *args index: the compiled body reads them other than by
    # a named parameter, so the wrap stays unsafe; the named parameter is safe
    assert _fr003(guided) == [(35, "generate", Safety.UNSAFE), (36, "blend", Safety.UNSAFE), (37, "scale", Safety.SAFE)]
    messages = [m.finding.message for m in sorted(guided.matches, key=lambda m: m.finding.line)]
    assert "the trace saw `sampling_kwargs['temperature']` guarded on a float's value" in messages[0]
    assert "the trace saw `args[1]` guarded" in messages[1]
    assert "the trace saw `factor` guarded" in messages[2]
    assert all("--unproven" not in m for m in messages)  # the trace is the evidence of change
    new = guided.files[0].new.decode()  # safe fixes only
    assert 'sc(logits, torch.tensor(s["w"], dtype=torch.float64))' in new
    assert 'mix(logits, s["w"])' in new and 'temperature=s["temperature"]' in new


def test_float_evidence_maps_guard_sources_to_their_slots():
    from test_trace import fixture

    evidence = trace_guide.float_evidence(fixture("float_evidence"))
    [(path, found)] = evidence.items()
    assert path.endswith("float_evidence.py")
    assert dict(found.float_args) == {
        9: frozenset({"sampling_kwargs['temperature']"}),
        13: frozenset({"args[1]"}),
        17: frozenset({"factor"}),
    }


def test_no_float_evidence_for_attributes_or_torch_code():
    def entry(reason, filename="m.py"):
        return tr.CodeEntry(name="f", filename=filename, firstlineno=3, reasons=tr.parse_reason(reason))

    trace = tr.Trace(entries=[
        entry("0/0: L['cfg'].lr == 0.1"),  # an attribute of an argument: not an argument FR003 can wrap
        entry("0/0: L['t'] == 0.5", filename="/x/site-packages/torch/optim/sgd.py"),
    ])
    assert trace_guide.float_evidence(trace) == {}


@pytest.mark.parametrize("name,fixed", [("forwarded_float", 2), ("float_evidence", 3)])
def test_run_fix_wraps_floats_where_they_are_passed_in(tmp_path, name, fixed):
    """Measured on 2.13: forwarded_float 4 -> 2 graphs, float_evidence 6 -> 3
    (with --unsafe-fixes: two of its wraps are unsafe), same printed result."""
    proc, script = run_cli(tmp_path, name, "--fix", "--unsafe-fixes")
    out = proc.stdout
    assert proc.returncode == 0, out
    assert out.count(f"fixed: {name}.py:") == fixed, out
    before, after = graphs(out, "total")
    assert after < before, out
    for line in out.splitlines():
        if line.strip().startswith(("decode_one (", "ema_update (", "generate (", "blend (", "scale (")):
            b, a = map(int, line.split()[-3::2])
            assert a < b, line
    first, second = results(out)
    assert first == second
    assert "Exit code unchanged (0)." in out


# -- a module global rebound between calls: FR011's fix (unsafe) ------------------------


def test_global_rebound_is_matched_and_held_back_without_unsafe_fixes(copied):
    script, trace = copied("int_global")
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    [m] = [m for m in guided.matches if m.finding.code == "FR011"]
    assert m.cause == tr.GLOBAL and m.entry.name == "shifted"
    assert m.finding.fix.safety == Safety.UNSAFE and not m.finding.applied  # it changes a signature
    unsafe = trace_guide.guide(trace, Settings(unsafe_fixes=True), [str(script.parent)], fixing=True)
    new = unsafe.files[0].new.decode()
    assert "def shifted(x, *, SHIFT):" in new
    assert "float(shifted(x, SHIFT=SHIFT).sum())" in new


def test_run_fix_passes_the_global_as_an_argument(tmp_path):
    """Measured on 2.13: shifted 4 -> 2 graphs (SHIFT becomes a symbolic int
    after one change), add_n 4 -> 2 (FR001), same printed result."""
    proc, script = run_cli(tmp_path, "int_global", "--fix", "--unsafe-fixes")
    out = proc.stdout
    assert proc.returncode == 0, out
    assert "fixed: int_global.py:15:16: FR011 " in out, out
    assert graphs(out, "shifted (int_global.py)") == (4, 2)
    # (a second round then names the int automatic dynamic made symbolic: add_n 2 -> 1)
    assert "Round 2" in out and graphs(out.split("Round 2")[1], "add_n (int_global.py)") == (2, 1)
    assert len(set(results(out))) == 1 and len(results(out)) == 3
    assert "def shifted(x, *, SHIFT):" in script.read_text()


def test_interactive_review_offers_floats_only_the_trace_shows(copied, tmp_path):
    import pexpect
    from test_trace import PROMPT, _spawn

    script, _trace = copied("float_evidence")
    original = script.read_text()
    child = _spawn(["check", ".", "--from-trace", "trace", "-i"], tmp_path)
    shown = []
    while child.expect([PROMPT, pexpect.EOF]) == 0:
        shown.append(child.before)
        child.sendline("n")
    child.close()
    text = "\n".join(shown)
    assert "the trace saw `factor` guarded on a float's value" in text, text
    assert "the trace saw `args[1]` guarded" in text
    assert script.read_text() == original  # every fix rejected


# -- FR005 knows the flag cannot help; torch's own code compiled for the user's call -----


def test_no_flag_where_fr005_reports_that_it_cannot_cure(copied):
    """Blocks index a Python list with their layer_idx: FR005 reports with no
    fix; the trace's evidence must not set the flag anyway (measured on 2.13:
    4 -> 4 graphs with it)."""
    script, trace = copied("layer_list_index")
    guided = trace_guide.guide(trace, NEW, [str(script.parent)], fixing=True)
    [m] = guided.matches
    assert m.finding.code == "FR005" and m.finding.fix is None
    assert not [m for m in guided.matches if m.finding.code == "TRACE"]
    assert not guided.files[0].changed


def test_recompile_of_torch_code_matches_the_finding_on_the_users_call(copied):
    """A compiled nn.Sequential: dynamo compiles torch's Sequential.forward
    (through its wrapper), mapped to the user's call line; FR007's
    maybe_mark_dynamic on that call cures the ragged last batch."""
    script, trace = copied("sequential_ragged")
    [entry] = [e for e in trace.entries if e.reasons]
    assert tr.is_library_file(entry.filename) and entry.user_frame[1] == 17
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    [m] = guided.matches
    assert (m.finding.code, m.finding.line, m.cause) == ("FR007", 17, tr.TENSOR_SHAPE)
    assert "torch._dynamo.maybe_mark_dynamic(inputs, 0)\n" in guided.files[0].new.decode()


def test_run_fix_cures_a_ragged_batch_into_torch_code(tmp_path):
    """Measured on 2.13: 2 -> 1 graphs, same printed result; the graphs table
    names the user's file, not torch's."""
    proc, script = run_cli(tmp_path, "sequential_ragged", "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    assert graphs(out, "inner (via <module>) (sequential_ragged.py)") == (2, 1)
    first, second = results(out)
    assert first == second


def test_optimizer_step_recompiling_on_identity_still_implicates_fr004(copied):
    """torch shows only the first failing guard: two optimizers sharing
    `step` read as object identity `self`; the table says so, and FR004's
    finding (its own analysis proves the lr changes) is still implicated."""
    script, trace = copied("two_optimizers")
    [step] = [e for e in trace.entries if e.name == "step"]
    # 2.9 and 2.14 also show the hyperparameter guard beside the identity one
    assert step.causes[0] == tr.IDENTITY and set(step.causes) <= {tr.IDENTITY, tr.OPTIMIZER_LR} and step.graphs == 4
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    codes = sorted({(m.finding.code, m.cause) for m in guided.matches})
    assert codes == [("FR004", tr.OPTIMIZER_LR)]
    new = guided.files[0].new.decode()
    assert "lr=torch.tensor(0.01" in new and 'group["lr"].fill_(lr)' in new


# -- an optimizer whose lr a scheduler of another module writes ----------------------------


def _run_fix_main(folder):
    """``fix-recompiles run --fix -- python main.py`` in ``folder`` (a
    multi-file program), the command in a warm fork."""
    return warm_python.cli_run(
        check=False,
        args=CLI + ["run", "--fix", "--", *warm_python.python_command(_env()), "main.py"],
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_env(),
        timeout=600,
    )


def test_run_fix_applies_the_lr_writers_edits_of_another_module(tmp_path):
    """tests/realworld/pos_lr_field_scheduler: main.py steps Adam in a compiled
    function; scheduler.py's WarmupScheduler writes `group[self.lr_field]`.
    The trace implicates main.py only; FR004's fix there is whole only with
    the writer's `.fill_` in scheduler.py, which the project model (every
    file under the folder) proves reached by that optimizer alone: both are
    applied. Measured on 2.13: 3 -> 2 graphs, same output."""
    import shutil

    program = SCRIPTS.parent / "realworld" / "pos_lr_field_scheduler"
    for name in ("main.py", "scheduler.py"):
        shutil.copy(program / name, tmp_path / name)
    proc = _run_fix_main(tmp_path)
    out = proc.stdout
    assert proc.returncode == 0, out
    assert "fixed: main.py:18:44: FR004 " in out and "fixed: scheduler.py:" in out, out
    before, after = graphs(out, "total")
    assert after < before, out
    assert ".fill_(" in (tmp_path / "scheduler.py").read_text()
    printed = [ln for ln in out.splitlines() if re.fullmatch(r"-?\d+\.\d+", ln.strip())]
    assert len(printed) == 2 and printed[0] == printed[1], out


def test_no_lr_writer_edit_when_its_optimizer_is_not_fixed(tmp_path, monkeypatch):
    """The same program with FR004's fix held back (ignored): the writer's
    `.fill_` would crash on a float lr, so scheduler.py is not touched."""
    import shutil

    program = SCRIPTS.parent / "realworld" / "pos_lr_field_scheduler"
    for name in ("main.py", "scheduler.py"):
        shutil.copy(program / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    entry = tr.CodeEntry(
        name="step", filename="/x/site-packages/torch/optim/adam.py", firstlineno=200,
        reasons=tr.parse_reason("0/0: self.param_groups[0]['lr'] == 0.0001"),
        graphs=2, recompiles=1, user_frame=(str(tmp_path / "main.py"), 26, "train_step"),
    )
    trace = tr.Trace(entries=[entry])
    fixed = trace_guide.guide(trace, Settings(), [str(tmp_path)], fixing=True)
    assert sorted(g.display_path.rsplit("/", 1)[-1] for g in fixed.files if g.changed) == ["main.py", "scheduler.py"]
    held = trace_guide.guide(trace, Settings(ignore=frozenset({"FR004"})), [str(tmp_path)], fixing=True)
    assert not [g for g in held.files if g.changed]


# -- a function compiled in another module, fed a float from this one ----------------------


def _cross_module(tmp_path):
    import shutil

    program = SCRIPTS.parent / "realworld" / "pos_cross_module_dtype"
    for name in ("main.py", "kernels.py"):
        shutil.copy(program / name, tmp_path / name)
    return tmp_path / "main.py", tmp_path / "kernels.py"


def test_a_float_fed_to_a_function_compiled_in_another_module_is_matched(tmp_path, monkeypatch):
    """The trace names kernels.py (`scaled_add`, decorated: its code object
    starts at the decorator's line 4); FR003 reports in main.py, where the
    float is passed in: main.py is analysed as a file that feeds it, and the
    finding matches by the compiled function's first lines."""
    main, kernels = _cross_module(tmp_path)
    monkeypatch.chdir(tmp_path)
    entry = tr.CodeEntry(
        name="scaled_add", filename=str(kernels), firstlineno=4, graphs=2, recompiles=1,
        reasons=tr.parse_reason("0/0: alpha == 0.01"),
    )
    guided = trace_guide.guide(tr.Trace(entries=[entry]), Settings(), [str(tmp_path)], fixing=True)
    [m] = guided.matches
    assert (m.finding.code, m.finding.path, m.finding.line) == ("FR003", "main.py", 21)
    assert m.finding.feeds_path == str(kernels) and 4 in m.finding.feeds
    [g] = [g for g in guided.files if g.changed]
    assert g.path == str(main) and b"scaled_add(x, y, torch.tensor(alpha, dtype=torch.float64))" in g.new
    # another function of kernels.py (another first line) implicates nothing in main.py
    other = dataclasses.replace(entry, firstlineno=9)
    assert not trace_guide.guide(tr.Trace(entries=[other]), Settings(), [str(tmp_path)], fixing=True).matches


def test_run_fix_cures_a_float_fed_across_modules(tmp_path):
    """Measured on 2.13: scaled_add 2 -> 1 graphs, same printed values."""
    _cross_module(tmp_path)
    proc = _run_fix_main(tmp_path)
    out = proc.stdout
    assert proc.returncode == 0, out
    assert "fixed: main.py:21:26: FR003 " in out, out
    assert graphs(out, "scaled_add (kernels.py)") == (2, 1)
    printed = [ln for ln in out.splitlines() if ln.startswith("[")]
    assert len(printed) == 2 and printed[0] == printed[1], out


# -- a list attribute grown by the compiled code: FR013 (report only) -------------------


def test_a_length_storm_of_a_list_attribute_is_matched_to_fr013(copied):
    """`len(self.hist) == 7`: the table's cure names FR013, whose finding sits
    at the append inside forward (matched by forward's lines, not the compile
    site); report only, nothing applied."""
    script, trace = copied("list_attr_growth")
    [entry] = [e for e in trace.entries if e.name == "forward"]
    assert entry.graphs == 8 and entry.limit_hit and entry.causes[0] == tr.LENGTH
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    [m] = [m for m in guided.matches if m.finding.code == "FR013"]
    assert m.cause == tr.LENGTH and m.finding.line == 14 and m.finding.fix is None
    rows = [r for r in traced_mode.report_lines(trace, Settings(), guided) if r.startswith("forward")]
    assert "length `self.hist`" in rows[0] and "FR013, report:" in rows[0] and "found nothing" not in rows[0]
    assert not any(g.changed for g in guided.files)
