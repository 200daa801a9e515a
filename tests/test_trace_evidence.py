"""Issue 13, fixes made from the trace's evidence where no static finding
covers the failing guard: FR005's flag for int attributes of ``self`` (a
submodule's counter, per-instance layer indices of blocks compiled one by
one).  Unit tests read the trace recorded from ``tests/trace_scripts/
module_attrs.py`` under torch 2.13; the end-to-end test really runs it."""

from __future__ import annotations

import pytest
from test_trace import SCRIPTS, copied, graphs, results, run_cli  # noqa: F401  (copied: a fixture)

from codemods import trace as tr
from codemods import trace_run
from codemods.context import Settings
from codemods.findings import Safety

FLAG = "torch._dynamo.config.allow_unspec_int_on_nn_module = True"
#: target torch with the flag (FR005's FLAG_SINCE): the plain assignment
NEW = Settings(target_torch=(2, 13))


def test_flag_from_the_trace_where_no_static_finding_covers_it(copied):
    script, trace = copied("module_attrs")
    guided = trace_run.guide(trace, NEW, [str(script.parent)], fixing=True)
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
    new, line = trace_run.unspec_flag(data, [18], NEW)
    assert line == 45  # decoder.compile(backend="eager"): FR005's placement
    lines = new.decode().splitlines()
    assert lines[44:46] == [FLAG, 'decoder.compile(backend="eager")']
    # a second run finds the flag set and adds nothing
    assert trace_run.unspec_flag(new, [18], NEW) == (None, 0)
    # an older target torch: FR005's rendering, behind hasattr
    old, _ = trace_run.unspec_flag(data, [18], Settings())
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
    assert trace_run.unspec_flag(data, [5], Settings()) == (None, 0)


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
    assert trace_run._module_int_sources(entry) == flagged


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

    script = tmp_path / "library_fn.py"
    if script_text is None:
        shutil.copy(SCRIPTS / "library_fn.py", script)
    else:
        script.write_text(script_text)
    monkeypatch.chdir(tmp_path)
    return script, tr.read_trace(str(fixture_path("library_fn")))


def test_recorded_library_recompile_names_no_user_file():
    from test_trace import fixture

    [entry] = fixture("library_fn").entries
    # torch 2.13 compiles F.softmax through its wrap_inline wrapper
    assert (entry.name, entry.firstlineno, entry.graphs) == ("inner", 67, 6)
    assert entry.filename.replace("\\", "/").endswith("torch/_dynamo/external_utils.py")
    assert entry.user_frame is None
    assert trace_run.entry_file(entry) is None


def test_library_recompile_is_mapped_to_the_users_compile_call(tmp_path, monkeypatch):
    script, trace = _library_trace(tmp_path, monkeypatch)
    guided = trace_run.guide(trace, Settings(), [str(tmp_path)], fixing=True)
    [entry] = trace.entries
    assert entry.library_site == (str(script), 8)
    assert tr.display_name(entry) == "F.softmax"
    [row] = tr.table_rows(trace, list(trace_run.BY_CODE), relative_to=str(tmp_path))
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
    guided = trace_run.guide(trace, Settings(), [str(tmp_path)], fixing=True)
    [entry] = trace.entries
    assert entry.library_site is None and entry.user_frame is None  # which one compiled it: unknown
    assert not guided.matches and not guided.files


def test_a_users_own_function_is_no_library_candidate(tmp_path, monkeypatch):
    text = "import torch\n\ndef f(x):\n    return x\n\nsoftmax = torch.compile(f, dynamic=False)\n"
    _script, trace = _library_trace(tmp_path, monkeypatch, text)
    trace_run.map_library_entries(trace, [str(tmp_path)], Settings())
    assert trace.entries[0].library_site is None


def test_run_fix_cures_a_compiled_library_function(tmp_path):
    """Measured on 2.13: softmax over sizes 2..7 under dynamic=False, 6 -> 2
    graphs once `dynamic=False` is removed at the user's compile call."""
    proc, script = run_cli(tmp_path, "library_fn", "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    assert "fixed: library_fn.py:8:" in out and " FR001 " in out
    before, after = graphs(out, "total")
    assert (before, after) == (6, 2), out
    first, second = results(out)
    assert first == second
    assert 'softmax = torch.compile(F.softmax, backend="eager")\n' in script.read_text()
