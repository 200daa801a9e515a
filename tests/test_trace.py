"""Trace-guided fixing (issue 7).

Unit tests read trace files captured under torch 2.13 from the scripts in
``tests/trace_scripts`` (recorded by ``tests/trace_fixtures/trim.py record``,
with the recording machine's paths replaced by placeholders that
:func:`fixture_text` fills with this checkout's).  The end-to-end tests really
run those scripts, under ``fix-recompiles run``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import warm_python
from codemods.trace import read as tr
from codemods.modes import traced as traced_mode
from codemods.trace import guide as trace_guide
from codemods.analysis.context import Settings
from codemods.findings import Safety
from codemods.transforms import BY_CODE

HERE = Path(__file__).parent
FIXTURES = Path(os.environ.get("FIX_RECOMPILES_FIXTURES") or HERE / "trace_fixtures")
SCRIPTS = HERE / "trace_scripts"
PYTHON = sys.executable
CLI = [PYTHON, "-c", "from cli import main; main()"]


from trace_fixtures.trim import load as fixture_text  # noqa: E402

_FILLED = Path(tempfile.mkdtemp(prefix="trace-fixtures-"))


def fixture_path(name: str) -> Path:
    """The fixture with this machine's paths filled in (a scratch copy)."""
    path = _FILLED / f"{name}.log"
    if not path.exists():
        path.write_text(fixture_text(name), encoding="utf-8")
    return path


def fixture(name: str) -> tr.Trace:
    return tr.read_trace(str(fixture_path(name)))


def compiles_library_functions() -> bool:
    """Does this torch compile a function of its own given to torch.compile
    (``torch.compile(F.softmax)``)?  2.13 does (through its ``inner``
    wrapper); 2.9 skips torch's files and runs it eagerly, so its recording
    of library_fn holds no compile at all."""
    return bool(fixture("library_fn").entries)


def only(trace: tr.Trace, name: str) -> tr.CodeEntry:
    found = [e for e in trace.entries if e.name == name]
    assert len(found) == 1, [e.name for e in trace.entries]
    return found[0]


# -- parsing captured traces ----------------------------------------------------------

CASES = [
    # fixture, function, first line (decorator line for decorated defs), graphs, limit hit, cause, source
    ("anneal_float", "scaled_softmax", 5, 2, False, tr.FLOAT_ARG, "temperature"),
    ("module_counter", "forward", 11, 8, True, tr.MODULE_INT_ATTR, "self.calls"),
    ("growing_inputs", "normalize", 6, 8, True, tr.TENSOR_SHAPE, "x"),
    ("loader_shapes", "energy", 12, 6, False, tr.TENSOR_SHAPE, "x"),
    ("int_global", "add_n", 8, 4, False, tr.INT_ARG, "n"),
    ("int_global", "shifted", 13, 4, False, tr.GLOBAL, "SHIFT"),
    (
        "optimizer_lr",
        "step",
        None,
        2,
        False,
        tr.OPTIMIZER_LR,
        "self.param_groups[0]['lr']",
    ),
    ("fails", "scale", 7, 4, False, tr.TENSOR_SHAPE, "x"),
]


@pytest.mark.parametrize("name,function,line,graphs,limit,cause,source", CASES)
def test_entries_from_captured_traces(
    name, function, line, graphs, limit, cause, source
):
    trace = fixture(name)
    entry = only(trace, function)
    assert entry.graphs == graphs
    assert entry.limit_hit is limit
    assert entry.causes == [cause]
    assert {r.source for r in entry.reasons} == {source}
    # every compile after the first has a reason (the limit-hit attempt adds one more)
    assert entry.recompiles == graphs - 1 + (1 if limit else 0)
    if line is not None:
        assert Path(entry.filename).name == f"{name}.py"
        assert entry.firstlineno == line
        # the script's own source agrees: the line is the def or its decorator
        text = (SCRIPTS / f"{name}.py").read_text().splitlines()[line - 1]
        assert text.lstrip().startswith(("@", "def "))
        assert function in text or text.lstrip().startswith("@")


def test_decorated_function_starts_at_the_decorator_line():
    entry = only(fixture("growing_inputs"), "normalize")
    lines = (SCRIPTS / "growing_inputs.py").read_text().splitlines()
    assert lines[entry.firstlineno - 1].startswith("@torch.compile")
    assert lines[entry.firstlineno].startswith("def normalize")


def test_optimizer_recompiles_are_mapped_to_the_user_frame():
    entry = only(fixture("optimizer_lr"), "step")
    assert "torch/optim" in entry.filename.replace("\\", "/")
    fname, line, func = entry.user_frame
    assert Path(fname).name == "optimizer_lr.py" and func == "opt_step"
    assert (SCRIPTS / "optimizer_lr.py").read_text().splitlines()[
        line - 1
    ].strip() == "opt.step()"
    assert tr.display_location(entry).endswith(f"optimizer_lr.py:{line}")


def test_dtype_recompiles_are_bounded():
    trace = fixture("dtype_other")
    entry = only(trace, "plus_one")
    assert entry.causes == [tr.DTYPE]
    rows = tr.table_rows(trace, list(BY_CODE))
    assert rows == [
        [
            "plus_one",
            tr.display_location(entry),
            "3",
            "no",
            "dtype `x`",
            "bounded, no fix needed (2 recompiles: one graph per dtype)",
        ]
    ]


def test_unmapped_reason_is_shown_raw_as_other(tmp_path):
    # a reason no rule of the classifier knows (a future torch's wording)
    text = fixture_text("dtype_other").replace(
        "tensor 'x' dtype mismatch. expected Float, actual Double",
        "a sentence a future torch might write",
    )
    (tmp_path / "t.log").write_text(text)
    entry = only(tr.read_trace(str(tmp_path)), "plus_one")
    assert entry.causes == [tr.DTYPE, tr.OTHER]
    rows = tr.table_rows(tr.read_trace(str(tmp_path)), list(BY_CODE))
    assert rows[1][4:] == ["other: a sentence a future torch might write", "none"]


def test_payload_lines_and_garbage_are_skipped(tmp_path):
    src = fixture_text("anneal_float")
    assert "\n\t" in src  # the fixture keeps one payload record
    (tmp_path / "t.log").write_text(
        "not json at all\n" + src + "V1 x.py:1] {broken json\n"
    )
    trace = tr.read_trace(str(tmp_path))
    assert trace.bad_lines == 2
    assert [(e.name, e.graphs) for e in trace.entries] == [("scaled_softmax", 2)]


def test_one_file_per_process_is_read(tmp_path):
    for i, name in enumerate(("anneal_float", "growing_inputs")):
        shutil.copy(
            fixture_path(name),
            tmp_path / f"dedicated_log_torch_trace_rank_{i}.log",
        )
    trace = tr.read_trace(str(tmp_path))
    assert [e.name for e in trace.entries] == ["scaled_softmax", "normalize"]
    assert trace.total_graphs == 10


def test_recompile_limit_needs_the_limit_failure(tmp_path):
    # the same records without the limit-hit attempt: no limit
    lines = fixture_text("growing_inputs").splitlines(keepends=True)
    # 2.13: "Dynamo recompile limit exceeded"; 2.9: fail_type "RecompileLimitExceeded"
    kept = [ln for ln in lines if "recompile limit exceeded" not in ln and "RecompileLimitExceeded" not in ln]
    assert len(kept) == len(lines) - 1
    (tmp_path / "t.log").write_text("".join(kept))
    entry = only(tr.read_trace(str(tmp_path)), "normalize")
    assert entry.limit_hit is False and entry.graphs == 8


# -- classifying guard text: structure, several releases' spellings -------------------


@pytest.mark.parametrize(
    "reason,cause,source",
    [
        ("0/0: c == 0.5  # return x + c  # s1.py:4 in fn", tr.FLOAT_ARG, "c"),
        ("0/3: L['c'] == 0.25", tr.FLOAT_ARG, "c"),  # 2.1-era local source
        ("1/0: n == 3", tr.INT_ARG, "n"),
        ("0/1: L['n'] == -2", tr.INT_ARG, "n"),
        ("0/0: x == 1e-05", tr.FLOAT_ARG, "x"),
        ("0/0: G['SCALE'] == 0.5", tr.GLOBAL, "SCALE"),
        (
            "0/0: self.count == 4  # self.count += 1 (HINT: ...)",
            tr.MODULE_INT_ATTR,
            "self.count",
        ),
        ("0/0: L['self'].count == 4", tr.MODULE_INT_ATTR, "self.count"),
        (
            "2/0: self.param_groups[0]['lr'] == 0.01",
            tr.OPTIMIZER_LR,
            "self.param_groups[0]['lr']",
        ),
        (
            "0/0: tensor 'x' size mismatch at index 0. expected 2, actual 3",
            tr.TENSOR_SHAPE,
            "x",
        ),
        (
            "0/0: tensor 'L['x']' size mismatch at index 1. expected 4, actual 5",
            tr.TENSOR_SHAPE,
            "x",
        ),
        (  # torch's own words for a Parameter: static under automatic dynamic
            "0/1: tensor 'X' size mismatch at index 0. expected 32, actual 8. Guard failed on a parameter, "
            "consider using torch._dynamo.config.force_parameter_static_shapes = False to allow dynamism on parameters.",
            tr.PARAMETER_SHAPE,
            "X",
        ),
        (
            "0/0: tensor 'x' stride mismatch at index 0. expected 1, actual 2",
            tr.LAYOUT,
            "x",
        ),
        (
            "0/0: tensor 'x' dtype mismatch. expected Float, actual Double",
            tr.DTYPE,
            "x",
        ),
        ("0/0: flag == True", tr.CONSTANT, "flag"),
        ("0/0: ___check_type_id(L['x'], 94000)", tr.TYPE, "x"),
        ("0/0: len(L['xs']) == 3", tr.LENGTH, "xs"),
        ("0/0: a completely new sentence torch 3.0 might write", tr.OTHER, ""),
        ("0/0: Unable to find recompilation reasons", tr.OTHER, ""),
    ],
)
def test_classify(reason, cause, source):
    [parsed] = tr.parse_reason(reason)
    assert (parsed.cause, parsed.source) == (cause, source)
    if cause == tr.OTHER:
        assert parsed.text == re.sub(
            r"^\d+/\d+: ", "", reason
        )  # raw, only the id stripped


def test_reason_user_stack_gives_file_and_line():
    entry = only(fixture("anneal_float"), "scaled_softmax")
    [r] = entry.reasons
    assert Path(r.file).name == "anneal_float.py" and r.line == 6


def test_cure_table_follows_the_registry():
    plain = tr.CodeEntry("f", "a.py", 1)
    assert tr.rule_cure_codes(plain, tr.FLOAT_ARG, ["FR001", "FR003"]) == ["FR003", "FR001"]
    assert tr.rule_cure_codes(plain, tr.FLOAT_ARG, ["FR001"]) == ["FR001"]
    assert tr.rule_cure_codes(plain, tr.GLOBAL, list(BY_CODE)) == ["FR011"]  # int globals: passed as an argument
    assert tr.rule_cure_codes(plain, tr.OTHER, list(BY_CODE)) == []
    assert set(tr.cure_table()) == set(tr.CAUSES)
    assert tr.BOUNDED <= set(tr.CAUSES) and set(tr.REMEDIES) <= set(tr.CAUSES)


def test_rules_and_trace_cures_name_each_other_by_names_that_exist():
    """A rule's fix declared the edit of a trace cure, a trace cure declared
    the fix of a rule: both names are in the registries, and the cause is one
    the other side cures (the table names both for a match)."""
    from codemods.trace.registry import BY_NAME, TRACE_CURES

    pairs = [(rule, c) for rule in BY_CODE.values() for c in rule.cures if c.trace_cure]
    assert pairs, "FR013's fix is disable-growth-from-trace's decorator"
    for rule, c in pairs:
        assert c.cause in BY_NAME[c.trace_cure].causes, (rule.code, c)
    ruled = [cure for cure in TRACE_CURES if cure.rule]
    assert [cure.rule for cure in ruled] == ["FR005"]
    for cure in ruled:
        assert set(cure.causes) & {c.cause for c in BY_CODE[cure.rule].cures}, cure.name


# -- matching findings to traced code objects ------------------------------------------


def _retarget(name: str, script: Path) -> str:
    """The fixture's records with the script's path replaced by ``script``."""
    text = fixture_text(name)
    out = []
    for line in text.splitlines(keepends=True):
        if line.startswith("\t"):
            out.append(line)
            continue
        start = line.find("] {") + 2
        rec = json.loads(line[start:])
        m = rec.get("compilation_metrics")
        if m and m.get("co_filename") and m["co_filename"].endswith(f"/{name}.py"):
            m["co_filename"] = str(script)
        if m and isinstance(m.get("recompile_reason"), str):
            # the user lines the guards point at (`# ... name.py:25 in _use`)
            m["recompile_reason"] = m["recompile_reason"].replace(str(SCRIPTS / f"{name}.py"), str(script))
        if "str" in rec and rec["str"][0].endswith(f"/{name}.py"):
            rec["str"][0] = str(script)
        out.append(line[:start] + json.dumps(rec) + "\n")
    return "".join(out)


@pytest.fixture
def copied(tmp_path, monkeypatch):
    def make(name: str):
        script = tmp_path / f"{name}.py"
        shutil.copy(SCRIPTS / f"{name}.py", script)
        folder = tmp_path / "trace"
        folder.mkdir()
        (folder / "t.log").write_text(_retarget(name, script))
        monkeypatch.chdir(tmp_path)
        return script, tr.read_trace(str(folder))

    return make


def test_static_unsafe_fix_is_upgraded_by_the_trace(copied):
    script, trace = copied("loader_shapes")
    from codemods.pipeline.runner import run

    [static] = [f for f in run([str(script)], Settings(unproven=True)).findings if f.code == "FR001"]
    assert static.fix.safety == Safety.UNSAFE  # no variation visible statically
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    [m] = guided.matches
    assert (
        m.upgraded and m.finding.code == "FR001" and m.finding.fix.safety == Safety.SAFE
    )
    assert (
        "(safe: cures recompiles observed in trace: `energy` compiled 6 graphs on tensor shape `x`)"
        in m.finding.message
    )
    assert m.finding.applied and guided.files[0].changed
    assert b'@torch.compile(backend="eager")\ndef energy' in guided.files[0].new
    # the static message, without the clause that called the fix unsafe for want of evidence
    # (issue 29 item 7: not "unsafe as it may be deliberate" and "safe" on one line)
    because = static.fix.unsafe_because
    assert because and static.message.endswith(because) and "unsafe" in because
    assert static.message[: -len(because)] in m.finding.message and "unsafe" not in m.finding.message


def test_only_implicated_findings_are_applied(copied):
    script, trace = copied("growing_inputs")
    guided = trace_guide.guide(
        trace, Settings(unsafe_fixes=True), [str(script.parent)], fixing=True
    )
    assert [m.finding.code for m in guided.matches] == ["FR001"]
    # FR006 (raise the limit) is found statically but cures nothing: not applied
    assert [f.code for f in guided.files[0].others] == ["FR006"]
    new = guided.files[0].new.decode()
    assert (
        "cache_size_limit" not in new
        and '@torch.compile(backend="eager")\ndef normalize' in new
    )


def test_a_store_true_flag_as_dynamic_is_cured_from_the_trace(copied):
    # blocks compiled in a loop over a parameter's `transformer_blocks`: the
    # compile is tied to TransformerBlock.forward, and the trace's shape
    # recompiles are the evidence FR001's `or None` lacked statically
    script, trace = copied("store_true_blocks")
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    [m] = guided.matches
    assert (m.finding.code, m.upgraded, m.finding.line) == ("FR001", True, 37)
    new = guided.files[0].new.decode()
    assert 'block = torch.compile(block, backend="eager", dynamic=args.compile_dynamic or None)\n' in new
    assert new.replace(" or None", "", 1) == script.read_text()


def test_a_compile_of_an_annotated_parameter_matches_the_subclass_forward(copied):
    # `submodule: NodeSubmodule`: the subclass's forward the trace shows
    # recompiling is one the compile can have compiled (its FR001 is upgraded);
    # with the annotation gone nothing ties them
    script, trace = copied("annotated_submodule")
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    assert [(m.finding.code, m.upgraded) for m in guided.matches] == [("FR001", True)]
    script.write_text(script.read_text().replace("submodule: NodeSubmodule", "submodule"))
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    # no fix; the trace's shape cure says why it writes no mark
    assert [(m.finding.code, m.finding.rule_name, m.finding.fix) for m in guided.matches] == [("TRACE", "no-mark-placeable", None)]
    assert "no mark written: this file shows no call from eager code" in guided.matches[0].finding.message
    assert not guided.files[0].changed
    # and the table names no mark for it
    from codemods.modes.output import report_lines

    row = next(line for line in report_lines(trace, Settings(), guided) if "tensor shape `audio_features`" in line)
    assert "no mark can be written before its calls" in row and "maybe_mark_dynamic" not in row
    # the CI guard says so too, with why
    from codemods.modes.guard import cause_details

    entry = guided.matches[0].entry
    (shape,) = [d for d in cause_details(entry, [], trace) if d.startswith("cause: tensor shape")]
    assert "no mark can be written before its calls (this file shows no call from eager code" in shape, shape


def test_a_trace_of_another_function_implicates_nothing(copied, tmp_path):
    _script, trace = copied("growing_inputs")
    for e in trace.entries:
        e.firstlineno += 100  # the traced code object is not this file's compiled def
    guided = trace_guide.guide(trace, Settings(), [str(tmp_path)], fixing=True)
    assert guided.matches == [] and not guided.files[0].changed


def test_files_outside_the_paths_are_left_alone(copied, tmp_path):
    _script, trace = copied("growing_inputs")
    other = tmp_path / "elsewhere"
    other.mkdir()
    guided = trace_guide.guide(trace, Settings(), [str(other)], fixing=True)
    assert guided.files == []


@pytest.mark.skipif(
    "FR005" not in BY_CODE, reason="FR005 unspec-int-attrs is not in the registry yet"
)
def test_module_counter_matches_forward_of_the_compiled_module(copied):
    script, trace = copied("module_counter")
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    assert [(m.finding.code, m.cause) for m in guided.matches] == [
        ("FR005", tr.MODULE_INT_ATTR)
    ]


@pytest.mark.skipif(
    "FR004" not in BY_CODE, reason="FR004 optimizer-scalars is not in the registry yet"
)
def test_optimizer_lr_matches_fr004_in_the_calling_file(copied, tmp_path):
    _script, trace = copied("optimizer_lr")
    guided = trace_guide.guide(trace, Settings(), [str(tmp_path)], fixing=True)
    assert [(m.finding.code, m.cause) for m in guided.matches] == [
        ("FR004", tr.OPTIMIZER_LR)
    ]


def test_check_from_trace_cli_diff_and_fix(copied, tmp_path):
    script, _trace = copied("loader_shapes")
    before = script.read_bytes()
    proc = warm_python.cli_run(
        check=False,
        args=CLI
        + ["check", str(tmp_path), "--from-trace", str(tmp_path / "trace"), "--diff"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_env(),
    )
    assert proc.returncode == 1, proc.stderr
    assert (
        "energy" in proc.stdout
        and "loader_shapes.py:12" in proc.stdout
        and "tensor shape `x`" in proc.stdout
    )
    assert '-@torch.compile(backend="eager", dynamic=False)' in proc.stdout
    assert script.read_bytes() == before
    proc = warm_python.cli_run(
        check=False,
        args=CLI
        + ["check", str(tmp_path), "--from-trace", str(tmp_path / "trace"), "--fix"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_env(),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert b'@torch.compile(backend="eager")\ndef energy' in script.read_bytes()


def test_check_from_trace_missing_folder(tmp_path):
    proc = warm_python.cli_run(
        check=False,
        args=CLI + ["check", str(tmp_path), "--from-trace", str(tmp_path / "nope")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_env(),
    )
    assert proc.returncode == 2 and "no such trace folder" in proc.stderr


# -- end to end: really run the scripts -----------------------------------------------


def _env():
    env = dict(os.environ)
    env.pop("TORCH_TRACE", None)
    env["PYTHONPATH"] = str(HERE.parent) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def run_cli(tmp_path, name, *flags, cold=False, script_args=()):
    """``fix-recompiles run FLAGS -- python NAME.py [SCRIPT_ARGS]`` in a copy of the script.
    The command is a real child process of the CLI: with ``cold``, a new
    ``python``; otherwise tests/warm_exec.py, which has a fork of a warm
    torch process run the script with its stdio, folder and environment
    (TORCH_TRACE read again: the same trace as a new ``python`` writes)."""
    shutil.copy(SCRIPTS / f"{name}.py", tmp_path / f"{name}.py")
    python = [PYTHON] if cold else warm_python.python_command(_env())
    proc = warm_python.cli_run(
        check=False,
        args=CLI + ["run", *flags, "--", *python, f"{name}.py", *script_args],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_env(),
        timeout=600,
    )
    return proc, tmp_path / f"{name}.py"


def run_fix_main(folder):
    """``fix-recompiles run --fix -- python main.py`` in ``folder`` (a
    program of several modules written there)."""
    return warm_python.cli_run(
        check=False,
        args=CLI + ["run", "--fix", "--", *warm_python.python_command(_env()), "main.py"],
        cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_env(), timeout=600,
    )


def test_warm_command_traces_as_a_new_python(tmp_path):
    """The end-to-end tests give ``run`` a command that forks a warm torch
    process (tests/warm_exec.py); it must see what a new ``python`` sees:
    the same table (graphs, causes, the user's compile call of a library
    function, found only when no frame of the test harness shows in the
    trace's stacks), the same exit code."""
    if not compiles_library_functions():
        pytest.skip("this torch runs a torch function given to torch.compile eagerly (no compile to trace)")
    outputs = []
    for cold in (True, False):
        folder = tmp_path / ("cold" if cold else "warm")
        folder.mkdir()
        proc, _ = run_cli(folder, "library_fn", cold=cold)
        lines = proc.stdout.splitlines()
        # from the script's own output on: torch's import-time warnings go to a
        # new python's stderr, a warm one had them when the server imported torch
        outputs.append((proc.returncode, lines[next(i for i, ln in enumerate(lines) if ln.startswith("result:")):]))
    assert outputs[0] == outputs[1]
    code, lines = outputs[0]
    assert code == 1, lines  # the finding at the user's compile call of F.softmax, reported
    assert any(re.match(r"^F\.softmax\s+library_fn\.py:8\s+6\s", ln) for ln in lines), lines
    assert any(ln.startswith("library_fn.py:8:53: FR001 [*]") for ln in lines), lines


def results(output: str):
    return [ln for ln in output.splitlines() if ln.startswith("result:")]


def graphs(output: str, label: str):
    m = re.search(rf"^\s+{re.escape(label)}\s+(\d+) -> (\d+)$", output, re.MULTILINE)
    assert m, output
    return int(m.group(1)), int(m.group(2))


E2E = [
    # script, function, line, cause, rule that must be applied
    ("anneal_float", "scaled_softmax", 5, "float argument `temperature`", "FR003"),
    ("module_counter", "forward", 11, "module int attribute `self.calls`", "FR005"),
    ("growing_inputs", "normalize", 6, "tensor shape `x`", "FR001"),
    ("loader_shapes", "energy", 12, "tensor shape `x`", "FR001"),
    # the compiled code is a bound method reached through an attribute (`self._generate_one_token_fn(...)`)
    ("attr_bound_method", "_generate_one_token", 13, "float argument `temperature`", "FR003"),
    # compiled by a project decorator (a lazy torch.compile in the closure it returns)
    ("project_decorator", "scaled_residual", 22, "float argument `alpha`", "FR003"),
    # `torch.compile(self.__call__)` in a mixin: the forward of a module class deriving from it
    ("mixin_compiled_call", "forward", 29, "tensor shape `attention_mask`", "FR001"),
    # a class made per call of a factory: the type guard of each block's projection
    ("class_per_call", "forward", 22, "type `self.proj`", "FR019"),
    # an optimizer's state made lazily inside its compiled per-parameter update: the length of
    # `self.state` guarded, the dict FR017 found looked up by the tensor (6 -> 2)
    ("tensor_keyed_lazy_state", "__update", 11, "length `self.state`", "FR017"),
    # blocks compiled in a trainer's loop over a parameter's `transformer_blocks`, with
    # `dynamic=args.compile_dynamic` (a store_true flag: False): `or None` (musubi-tuner fe044b6)
    ("store_true_blocks", "forward", 19, "tensor shape `hidden_states`", "FR001"),
    # a submodule's forward compiled in place by an engine method whose parameter is
    # annotated with the base class; the subclass passed recompiles (mstar ef231010)
    ("annotated_submodule", "forward", 20, "tensor shape `audio_features`", "FR001"),
]


@pytest.mark.parametrize("name,function,line,cause,rule", E2E)
def test_run_fix_cures_recompiles(tmp_path, name, function, line, cause, rule):
    if rule not in BY_CODE:
        pytest.skip(f"{rule} is not in the registry yet")
    proc, script = run_cli(tmp_path, name, "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    row = re.search(
        rf"^{function}\s+{name}\.py:{line}\s+(\d+)\s+(yes|no)\s+{re.escape(cause)}\s+(.*)$",
        out,
        re.MULTILINE,
    )
    assert row, out
    assert rule in row.group(3)
    assert f"fixed: {name}.py:" in out and f" {rule} " in out
    before, after = graphs(out, "total")
    assert after < before, out
    assert (
        graphs(out, f"{function} ({name}.py)")[1]
        < graphs(out, f"{function} ({name}.py)")[0]
    )
    assert "Exit code unchanged (0)." in out
    first, *after_fixes = results(out)  # (a round more when the rerun shows a cure: test_trace_rounds.py)
    assert after_fixes and all(r == first for r in after_fixes)  # same printed values after the fix
    assert script.read_text() != (SCRIPTS / f"{name}.py").read_text()


def test_run_diff_writes_nothing(tmp_path):
    proc, script = run_cli(tmp_path, "loader_shapes", "--diff")
    assert proc.returncode == 1, proc.stdout
    assert "(safe: cures recompiles observed in trace:" in proc.stdout
    assert '+@torch.compile(backend="eager")' in proc.stdout
    assert script.read_text() == (SCRIPTS / "loader_shapes.py").read_text()


def test_run_bounded_cause_is_reported_and_nothing_changes(tmp_path):
    proc, script = run_cli(tmp_path, "dtype_other", "--fix")
    assert proc.returncode == 0, proc.stdout
    assert re.search(
        r"^plus_one\s+dtype_other\.py:5\s+3\s+no\s+dtype `x`\s+bounded, no fix needed \(2 recompiles: one graph per dtype\)$",
        proc.stdout,
        re.MULTILINE,
    ), proc.stdout
    assert "nothing to fix" in proc.stdout
    assert script.read_text() == (SCRIPTS / "dtype_other.py").read_text()


def test_run_failing_command_is_reported_and_nothing_changes(tmp_path):
    proc, script = run_cli(tmp_path, "fails", "--fix", cold=True)  # a new python, as a user runs it
    assert proc.returncode == 2, proc.stdout
    assert "the command failed with exit code 3; nothing changed" in proc.stdout
    assert re.search(
        r"^scale\s+fails\.py:7\s+4\s+no\s+tensor shape `x`", proc.stdout, re.MULTILINE
    ), proc.stdout
    assert script.read_text() == (SCRIPTS / "fails.py").read_text()


def test_run_fixes_a_command_that_fails_at_the_recompile_limit(tmp_path):
    """fullgraph=True raises FailOnRecompileLimitHit at the limit: the failure
    is the storm, so `run --fix` fixes it (it changed nothing: "the command
    failed"), and keeps the fix because the command then succeeds."""
    proc, script = run_cli(tmp_path, "fullgraph_float_storm", "--fix")
    out = proc.stdout
    assert proc.returncode == 1, out  # FR003's unsafe fix stays a finding: FR001's cured it
    assert "fixed: fullgraph_float_storm.py:9:33: FR001" in out and "1 implicated fix stays unsafe" in out
    assert "failed with exit code 1 at the recompile limit" in out and "its trace is the storm to cure" in out, out
    assert re.search(r"^ema_\s+fullgraph_float_storm\.py:9\s+8\s+yes\s+float argument `beta2`", out, re.MULTILINE), out
    assert "fixed: fullgraph_float_storm.py:" in out
    before, after = graphs(out, "total")
    assert after < before, out
    assert "Exit code 1 -> 0: the recompile limit is no longer hit." in out
    assert len(results(out)) == 1  # printed by the fixed run only: the first one raised
    assert script.read_text() != (SCRIPTS / "fullgraph_float_storm.py").read_text()


def test_run_diff_of_a_command_that_fails_at_the_recompile_limit(tmp_path):
    """The same storm with --diff: the fix is shown, nothing is written, and
    the exit code says the storm remains (1)."""
    proc, script = run_cli(tmp_path, "fullgraph_float_storm", "--diff")
    out = proc.stdout
    assert proc.returncode == 1, out
    assert "-@torch.compile(backend=\"eager\", dynamic=False, fullgraph=True)" in out
    assert "+@torch.compile(backend=\"eager\", fullgraph=True)" in out
    assert script.read_text() == (SCRIPTS / "fullgraph_float_storm.py").read_text()


def test_run_without_command(tmp_path):
    proc = warm_python.cli_run(
        check=False,
        args=CLI + ["run", "--fix"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=_env(),
    )
    assert proc.returncode == 2 and "no command given" in proc.stderr


# -- interactive review of the implicated fixes (-i) -----------------------------------

PROMPT = r"Apply this fix \[[Yy],[Nn],a,d,q,\?\]\? "


def _spawn(args, cwd):
    import pexpect

    env = _env()
    env["NO_COLOR"] = "1"
    return pexpect.spawn(
        PYTHON,
        CLI[1:] + list(args),
        cwd=str(cwd),
        env=env,
        encoding="utf-8",
        timeout=600,
        dimensions=(60, 200),
    )


def _finish(child):
    import pexpect

    child.expect(pexpect.EOF)
    tail = child.before
    child.close()
    return tail, child.exitstatus


def test_check_from_trace_interactive_offers_the_upgraded_fix(copied, tmp_path):
    script, trace = copied("loader_shapes")
    original = script.read_bytes()
    expected = trace_guide.guide(trace, Settings(), [str(tmp_path)], fixing=True)
    [g] = expected.files
    assert g.changed
    child = _spawn(["check", ".", "--from-trace", "trace", "-i"], tmp_path)
    child.expect(PROMPT)
    shown = child.before.replace("\r\n", "\n")
    # the table, then the fix the trace upgraded: safe, saying why, Enter = yes
    assert re.search(r"^energy\s+loader_shapes\.py:12\s+6\s+no\s+tensor shape `x`", shown, re.MULTILINE)
    assert (
        "(safe: cures recompiles observed in trace: `energy` compiled 6 graphs on tensor shape `x`)"
        in shown
    )
    assert "  safe fix" in shown and "UNSAFE" not in shown
    assert child.after.startswith("Apply this fix [Y,n,")
    assert '+@torch.compile(backend="eager")' in shown
    assert script.read_bytes() == original  # nothing written before the answer
    child.sendline("y")
    tail, status = _finish(child)
    assert "1 fix accepted, 0 rejected, 0 left (1 file written)." in tail
    assert status == 0
    assert script.read_bytes() == g.new  # exactly the implicated fix


def test_check_from_trace_interactive_never_offers_findings_not_implicated(
    copied, tmp_path
):
    script, _trace = copied("growing_inputs")
    original = script.read_text()
    # without the trace, -i offers two fixes in this file: FR001 and FR006
    child = _spawn(["check", "-i", "--unproven", "growing_inputs.py"], tmp_path)
    child.expect(PROMPT)
    first = child.before
    child.sendline("n")
    child.expect(PROMPT)
    assert "FR001" in first and "FR006" in child.before
    child.sendline("n")
    _finish(child)
    assert script.read_text() == original
    # with the trace: only FR001 (the trace shows the shape recompiles), and
    # rejecting it offers nothing more
    child = _spawn(["check", ".", "--from-trace", "trace", "-i"], tmp_path)
    child.expect(PROMPT)
    assert "FR001" in child.before
    assert "1 other finding in these files is not implicated by the trace and not offered" in child.before
    child.sendline("n")
    tail, status = _finish(child)
    assert "Apply this fix" not in tail and "FR006" not in tail
    assert "0 fixes accepted, 1 rejected, 0 left (0 files written)." in tail
    assert status == 1
    assert script.read_text() == original


def test_trace_filter_follows_lines_moved_by_accepted_fixes(copied):
    from codemods.pipeline.engine import analyze

    script, trace = copied("loader_shapes")
    keep = trace_guide.TraceFilter(trace)
    data = script.read_bytes()
    ctx, findings = analyze(str(script), script.name, data, Settings(unproven=True))
    [f] = keep(ctx, findings)
    assert f.code == "FR001" and f.fix.safety == Safety.SAFE
    # the same file after an accepted fix added three lines on top: the traced
    # code object (first line 12 when it ran) is now at line 15
    shifted = b"# a\n# b\n# c\n" + data
    ctx2, findings2 = analyze(str(script), script.name, shifted, Settings(unproven=True))
    [f2] = keep(ctx2, findings2)
    assert (f2.code, f2.line) == ("FR001", f.line + 3)
    # a filter that never saw the original cannot follow the move
    assert trace_guide.TraceFilter(trace)(ctx2, findings2) == []


def test_run_interactive_needs_a_terminal(tmp_path):
    marker = tmp_path / "ran"
    for flags in (["run", "-i"], ["check", ".", "--from-trace", "trace", "-i"]):
        args = flags + (
            ["--", PYTHON, "-c", f"open({str(marker)!r}, 'w')"] if flags[0] == "run" else []
        )
        proc = warm_python.cli_run(
            CLI + args,
            check=False,
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=_env(),
            timeout=120,
        )
        assert proc.returncode == 2, proc.stderr
        assert (
            "needs a terminal" in proc.stderr
            and "--diff" in proc.stderr
            and "--fix" in proc.stderr
        )
    assert not marker.exists()  # the command was not run


@pytest.mark.parametrize("other", ["--diff", "--fix"])
def test_run_interactive_is_exclusive_with_diff_and_fix(tmp_path, other):
    proc = warm_python.cli_run(
        check=False,
        args=CLI + ["run", "-i", other, "--", PYTHON, "-c", "pass"],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    assert proc.returncode == 2 and "exclusive" in proc.stderr


def test_run_interactive_end_to_end(tmp_path):
    name = "loader_shapes"
    shutil.copy(SCRIPTS / f"{name}.py", tmp_path / f"{name}.py")
    child = _spawn(["run", "-i", "--", PYTHON, f"{name}.py"], tmp_path)
    child.expect(PROMPT)
    shown = child.before.replace("\r\n", "\n")
    assert "(safe: cures recompiles observed in trace:" in shown
    assert '-@torch.compile(backend="eager", dynamic=False)' in shown
    child.sendline("y")
    out, status = _finish(child)
    out = shown + out.replace("\r\n", "\n")
    assert status == 0, out
    assert "1 fix accepted, 0 rejected, 0 left (1 file written)." in out
    before, after = graphs(out, "total")
    assert after < before, out
    fb, fa = graphs(out, f"energy ({name}.py)")
    assert fa < fb, out
    assert "Exit code unchanged (0)." in out
    first, second = results(out)
    assert first == second  # same printed values after the fix
    assert '@torch.compile(backend="eager")\ndef energy' in (tmp_path / f"{name}.py").read_text()


def test_run_fix_restores_files_when_graphs_do_not_go_down(copied, monkeypatch, capsys):
    """Issue 15 item 2: a fix that cures nothing is not kept.  The command run
    again after the fixes compiles as many graphs as before (the same trace):
    the written file gets its bytes back and the run exits 1."""
    script, trace = copied("loader_shapes")
    original = script.read_bytes()
    script.write_bytes(original.replace(b"dynamic=False", b""))  # what a fix wrote
    monkeypatch.setattr(traced_mode, "traced_run", lambda cmd: (0, trace, b""))
    code, _after = traced_mode._compare_after(["python", script.name], trace, 0, [(str(script), script.name, original)], 0)
    assert code == 1
    assert script.read_bytes() == original
    assert "did not reduce the graphs compiled" in capsys.readouterr().err


def test_parameter_shape_cure_is_advice_not_mark_dynamic():
    """A Parameter's shape guard (microsoft/dion#23: one compiled
    orthogonalizer over every weight) is not lifted by maybe_mark_dynamic
    (measured on 2.13: 8 -> 8 graphs), so the cure names torch's own flag and
    a plain tensor instead, and no rule claims it."""
    text = (
        "0/1: tensor 'X' size mismatch at index 0. expected 32, actual 8. Guard failed on a parameter, "
        "consider using torch._dynamo.config.force_parameter_static_shapes = False to allow dynamism on parameters."
    )
    entry = tr.CodeEntry("orthogonalize", "m.py", 20, graphs=8, limit_hit=True, reasons=tr.parse_reason(text) * 7)
    label = tr.cure_label(entry, tr.PARAMETER_SHAPE, ["FR001", "FR007"])
    assert "maybe_mark_dynamic" not in label and "FR001" not in label
    assert label.startswith("report: `X` is an nn.Parameter") and "force_parameter_static_shapes = False" in label
    assert tr.varying_dims(entry) == {}


def test_constant_value_at_the_limit_names_a_cure():
    """A str argument or attribute that takes many values (pytorch#100455: raw
    text into a compiled `predict(text)`; ComfyUI#9972: a str key per patch
    object) hits the limit: the cure says to move what depends on it out of
    the compiled code; a few values are "bounded only if" it takes few values
    (nari-labs/dia 5f57172d fixed three prompts' recompiles)."""
    reasons = tr.parse_reason("0/0: text == 'the cat sat'") * 7
    hit = tr.CodeEntry("predict", "m.py", 22, graphs=8, limit_hit=True, reasons=reasons)
    assert tr.cure_label(hit, tr.CONSTANT, []).startswith("report: every new value of `text`")
    few = tr.CodeEntry("predict", "m.py", 22, graphs=3, limit_hit=False, reasons=reasons[:2])
    assert tr.cure_label(few, tr.CONSTANT, []).startswith("bounded only if `text` takes few values: each new string is a graph (2 recompiles so far)")


# -- the configuration reaches every mode (issue 26) ----------------------------------
#
# `exclude` and `per-file-ignores` reached only `check`'s plain run: `check -i`
# offered, and `check --from-trace DIR --diff` printed, a fix in a file the
# configuration excludes (or whose per-file-ignores drop the rule).

CONFIG_DROPS = {
    "exclude": '[tool.fix-recompiles]\nexclude = ["loader_shapes.py"]\n',
    "per-file-ignores": '[tool.fix-recompiles]\nper-file-ignores = {"loader_shapes.py" = ["FR001"]}\n',
}


@pytest.mark.parametrize("setting", sorted(CONFIG_DROPS))
def test_from_trace_diff_honours_the_configuration(copied, tmp_path, setting):
    script, _trace = copied("loader_shapes")
    (tmp_path / "pyproject.toml").write_text(CONFIG_DROPS[setting])
    plain = warm_python.cli_run(check=False, args=CLI + ["check", "."], capture_output=True, text=True, cwd=tmp_path, env=_env())
    assert "FR001" not in plain.stdout, plain.stdout
    proc = warm_python.cli_run(
        check=False,
        args=CLI + ["check", ".", "--from-trace", "trace", "--diff"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_env(),
    )
    # FR001's fix (the removal of dynamic=False) is neither listed nor in the diff
    assert '-@torch.compile(backend="eager", dynamic=False)' not in proc.stdout, proc.stdout
    assert not re.search(r"^loader_shapes\.py:\d+:\d+: FR001", proc.stdout, re.MULTILINE), proc.stdout
    if setting == "exclude":  # the file is not the run's: nothing in it is analysed or fixed
        assert "+++ b/" not in proc.stdout and "nothing to fix" in proc.stdout, proc.stdout
        assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("setting", sorted(CONFIG_DROPS))
def test_check_interactive_honours_the_configuration(copied, tmp_path, setting):
    script, _trace = copied("loader_shapes")
    original = script.read_bytes()
    (tmp_path / "pyproject.toml").write_text(CONFIG_DROPS[setting])
    child = _spawn(["check", "-i", "--unproven", "."], tmp_path)
    tail, status = _finish(child)
    assert "Apply this fix" not in tail and "FR001" not in tail, tail
    assert status == 0, tail
    assert script.read_bytes() == original


# -- a restore never overwrites the user's edit (issue 29, item 1) --------------------


@pytest.mark.parametrize("user_saves", [True, False])
def test_run_fix_restore_keeps_an_edit_saved_during_the_rerun(copied, capsys, user_saves):
    """The rerun is a real child process; with ``user_saves`` it saves the
    fixed file (as an editor would) while it runs, then exits with another
    code, so the fixes are rolled back: the user's save is kept, not
    overwritten with the bytes from before the fixes."""
    script, trace = copied("loader_shapes")
    original = script.read_bytes()
    fixed = original.replace(b"dynamic=False", b"")  # what a fix wrote
    script.write_bytes(fixed)
    edit = f"open({str(script)!r}, 'a').write('# saved by the user\\n'); " if user_saves else ""
    cmd = [PYTHON, "-c", edit + "raise SystemExit(3)"]
    code, _after = traced_mode._compare_after(cmd, trace, 0, [(str(script), script.name, original)], 0)
    err = capsys.readouterr().err
    assert code == 2 and "exit code changed 0 -> 3" in err
    if user_saves:
        assert script.read_bytes() == fixed + b"# saved by the user\n"
        assert f"warning: {script.name}: changed while the command ran again; not restored" in err
    else:
        assert script.read_bytes() == original
        assert "warning" not in err


# -- SIGTERM stops the traced command too (issue 29, item 6) --------------------------


def test_sigterm_stops_the_command_and_leaves_no_trace_folder(tmp_path):
    """`timeout` (CI) sends SIGTERM to `fix-recompiles run`: the command it runs
    is stopped with it and its trace folder removed (both were left behind)."""
    import signal as sig
    import time

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    started = tmp_path / "started"
    child = f"import os, time; open({str(started)!r}, 'w').write(str(os.getpid())); time.sleep(120)"
    env = _env()
    env["TMPDIR"] = str(scratch)
    proc = subprocess.Popen([PYTHON, "-c", "from cli import main; main()", "run", "--", PYTHON, "-c", child],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while not started.exists() and time.time() < deadline:
        time.sleep(0.1)
    assert started.exists(), proc.stderr.read1() if proc.poll() is not None else "the command did not start"
    while not started.read_text() and time.time() < deadline:
        time.sleep(0.05)
    pid = int(started.read_text())
    assert list(scratch.glob("fix-recompiles-trace-*"))  # the trace folder, while it runs
    proc.send_signal(sig.SIGTERM)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err.decode()
    assert "terminated (SIGTERM)" in err.decode()
    assert not list(scratch.glob("fix-recompiles-trace-*"))
    try:
        os.kill(pid, 0)
        alive = True
    except ProcessLookupError:
        alive = False
    assert not alive, "the traced command is still running"


def test_run_fix_cures_an_optimizer_stepped_by_a_loop_of_another_module(tmp_path):
    """The optimizer is built in main.py and stepped by train.py's compiled
    train step (tests/realworld/pos_train_loop_steps_compiled_cross_module):
    the recompile is torch's `step` called from train.py, the cure FR004's
    in main.py (its finding names train.py's compiled code)."""
    folder = HERE / "realworld" / "pos_train_loop_steps_compiled_cross_module"
    for name in ("main.py", "train.py"):
        shutil.copy(folder / name, tmp_path / name)
    proc = run_fix_main(tmp_path)
    out = proc.stdout
    assert proc.returncode == 0, out
    assert re.search(r"^step \(via .*\)\s+train\.py:9\s+2\s+no\s+optimizer hyperparameter .*FR004", out, re.MULTILINE), out
    before, after = graphs(out, "total")
    assert after < before, out
    assert "lr=torch.tensor(1e-3)" in (tmp_path / "main.py").read_text()
    assert (tmp_path / "train.py").read_text() == (folder / "train.py").read_text()


def test_run_fix_cures_an_optimizer_step_compiled_itself(tmp_path):
    """`opt.step = torch.compile(opt.step)`: torch's step is a library
    function compiled in the file, and FR004's finding is on the
    constructor, not on that compile call; it matches all the same."""
    proc, script = run_cli(tmp_path, "compiled_opt_step", "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    assert re.search(r"^step \(via <module>\)\s+compiled_opt_step\.py:19\s+2\s+no\s+optimizer hyperparameter .*FR004", out, re.MULTILINE), out
    assert graphs(out, "total") == (2, 1), out
    first, second = results(out)
    assert first == second
    text = script.read_text()
    assert "lr=torch.tensor(0.0)" in text and 'group["lr"].fill_(' in text


def test_run_fix_cures_a_float_written_over_a_tensor_lr_by_another_module(tmp_path):
    """main.py's optimizer has a tensor lr already; scheduler.py writes
    floats over it (tests/realworld/pos_tensor_lr_float_writes_cross_module,
    DeepSpeed 407708cdb's cause): the recompile is torch's `step` called from
    main.py, which has nothing to fix; the cure is scheduler.py's `.fill_`."""
    folder = HERE / "realworld" / "pos_tensor_lr_float_writes_cross_module"
    for name in ("main.py", "scheduler.py"):
        shutil.copy(folder / name, tmp_path / name)
    proc = run_fix_main(tmp_path)
    out = proc.stdout
    assert proc.returncode == 0, out
    assert re.search(r"^step \(via .*\)\s+main\.py:\d+\s+2\s+no\s+optimizer hyperparameter .*FR004", out, re.MULTILINE), out
    before, after = graphs(out, "total")
    assert (before, after) == (3, 2), out
    assert (tmp_path / "main.py").read_text() == (folder / "main.py").read_text()
    assert 'param_group["lr"].fill_(new_lr)' in (tmp_path / "scheduler.py").read_text()


def test_run_fix_cures_a_library_function_compiled_here_and_called_from_user_code(tmp_path):
    """torch's code object recompiled, its nearest user frame a call far from
    the compile (unsloth's `torch.compile(flex_attention, dynamic=False)`
    called in `flex_shared_prefix_attention`): the finding at the file's one
    compile of a library function that can have compiled it is implicated
    (before, only a finding on the calling line could be), and its fix
    cures the storm."""
    proc, script = run_cli(tmp_path, "library_fn_via", "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    assert "fixed: library_fn_via.py:11:53: FR001" in out, out
    before, after = graphs(out, "total")
    assert after < before, out
    first, second = results(out)
    assert first == second
    assert 'softmax = torch.compile(F.softmax, backend="eager")\n' in script.read_text()


ROTATION = '''
import torch
from torch import nn

SCALE = 0.5


def scaled_linear_class():
    class ScaledLinear(nn.Linear):
        def forward(self, x):
            return nn.functional.linear(x, self.weight, self.bias) * SCALE

    return ScaledLinear


def install(module):
    module.__class__ = scaled_linear_class()
'''

BLOCKS = '''
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(self.proj(x)) + x


def compile_blocks(blocks):
    for block in blocks:
        block.compile(backend="eager")
'''

MAIN_BLOCKS = '''
import torch

from blocks import Block, compile_blocks
from rotation import install

torch.manual_seed(0)
blocks = [Block() for _ in range(4)]
for block in blocks:
    install(block.proj)
compile_blocks(blocks)
x = torch.randn(2, 4)
with torch.no_grad():
    for layer in blocks:
        x = layer(x)
print("result:", round(float(x.sum()), 4))
'''


def test_run_fix_cures_a_class_per_call_made_in_another_module(tmp_path):
    """unsloth's real layout (186e6cb5c1): the factory and the `__class__`
    swap in one module (diffusion_convrot.py), the blocks compiled one by
    one in another (diffusers' compile_repeated_blocks). No compile is in
    the factory's file; the type guard names the class
    (`type=<class 'rotation.scaled_linear_class.<locals>.ScaledLinear'>`),
    so its file is analysed and FR019's finding there matches."""
    for name, text in (("rotation.py", ROTATION), ("blocks.py", BLOCKS), ("main.py", MAIN_BLOCKS)):
        (tmp_path / name).write_text(text.lstrip())
    proc = run_fix_main(tmp_path)
    out = proc.stdout
    assert proc.returncode == 0, out
    assert re.search(r"^forward\s+blocks\.py:10\s+4\s+no\s+type `self\.proj`\s+FR019", out, re.MULTILINE), out
    assert graphs(out, "total") == (4, 1), out
    first, second = results(out)
    assert first == second
    assert "@functools.lru_cache(maxsize=None)\ndef scaled_linear_class" in (tmp_path / "rotation.py").read_text()
    assert (tmp_path / "blocks.py").read_text() == BLOCKS.lstrip()


def test_run_fix_cures_a_class_per_call_the_index_does_not_link(tmp_path):
    """As above, the blocks compiled through `map` (no compile in a loop,
    no `compile_repeated_blocks`): the index has no evidence, and the
    factory's module, which compiles nothing, is read only because the type
    guard names its class."""
    blocks = BLOCKS.replace(
        "    for block in blocks:\n        block.compile(backend=\"eager\")\n",
        "    list(map(lambda block: block.compile(backend=\"eager\"), blocks))\n",
    )
    assert blocks != BLOCKS
    for name, text in (("rotation.py", ROTATION), ("blocks.py", blocks), ("main.py", MAIN_BLOCKS)):
        (tmp_path / name).write_text(text.lstrip())
    check = warm_python.cli_run(check=False, args=CLI + ["check", "."], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_env(), timeout=600)
    assert "FR019" not in check.stdout, check.stdout
    proc = run_fix_main(tmp_path)
    out = proc.stdout
    assert proc.returncode == 0, out
    assert graphs(out, "total") == (4, 1), out
    assert "@functools.lru_cache(maxsize=None)\ndef scaled_linear_class" in (tmp_path / "rotation.py").read_text()


def test_a_class_made_per_call_in_the_script_matches_every_forward_it_reaches(tmp_path):
    """The factory in the script run as `__main__` (the guard names
    `__main__.scaled_linear_class.<locals>.ScaledLinear`) and two compiled
    forwards that reach its classes: FR019's one finding matches both rows
    (the first row said "FR019 found nothing here"), and its fix cures both."""
    proc, script = run_cli(tmp_path, "class_per_call_two_forwards", "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    rows = re.findall(r"^forward\s+class_per_call_two_forwards\.py:(\d+)\s+3\s+no\s+type `self\.proj`\s+(.*)$", out, re.MULTILINE)
    assert [line for line, _ in rows] == ["24", "33"], out
    assert all(cure.startswith("FR019") and "found nothing" not in cure for _, cure in rows), out
    assert graphs(out, "total") == (6, 2), out
    first, second = results(out)
    assert first == second
    assert "@functools.lru_cache(maxsize=None)\ndef scaled_linear_class" in script.read_text()
