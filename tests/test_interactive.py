"""``fix-recompiles -i``: the decision logic (pure), the session driven through
streams, and the real program driven in a pseudo-terminal (pexpect)."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pexpect
import pytest

from codemods.analysis.context import Settings
from codemods.pipeline.engine import process_source
from codemods.modes.interactive import (
    Choice,
    Session,
    Verdict,
    decide,
    line_map,
    parse_answer,
    prompt_keys,
    undecided,
)
from codemods.findings import Finding, Fix, Safety
from codemods.pipeline.runner import run

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI = os.path.join(REPO, "cli.py")

A, R, L = Verdict.ACCEPTED, Verdict.REJECTED, Verdict.LEFT

# two safe FR002 fixes on different statements
TWO = """\
import torch


def fn(x, c):
    y = x * 2
    # fix-recompiles: graph-break
    z = y + 1
    # fix-recompiles: graph-break
    return z + c
"""
TWO_FIRST = TWO.replace("    # fix-recompiles: graph-break\n    z", "    torch._dynamo.graph_break()\n    z")
TWO_SECOND = TWO.replace("    # fix-recompiles: graph-break\n    return", "    torch._dynamo.graph_break()\n    return")
TWO_BOTH = TWO_FIRST.replace("    # fix-recompiles: graph-break\n    return", "    torch._dynamo.graph_break()\n    return")

# two markers on the same statement and no `import torch`: each fix edits the
# same node and adds the import, so the second depends on the first
SAME = """\
def fn(x):
    y = x + 1
    # fix-recompiles: graph-break
    # fix-recompiles: graph-break
    return y
"""

# an unsafe FR001 fix (no evidence of varying inputs) and a safe FR002 fix
MIXED = """\
import torch


@torch.compile(dynamic=False)
def fn(x, c):
    y = x * 2
    # fix-recompiles: graph-break
    return y + c
"""


# --------------------------------------------------------------------------
# pure decision logic
# --------------------------------------------------------------------------


def test_prompt_shows_the_default_in_capitals():
    assert prompt_keys(True) == "[Y,n,a,d,q,?]"
    assert prompt_keys(False) == "[y,N,a,d,q,?]"


@pytest.mark.parametrize(
    "text,safe,expected",
    [
        ("\n", True, Choice.YES),
        ("\n", False, Choice.NO),
        ("  ", False, Choice.NO),
        ("y\n", False, Choice.YES),
        ("N\n", True, Choice.NO),
        ("a", True, Choice.ALL),
        ("d", True, Choice.DONE),
        ("q", True, Choice.QUIT),
        ("?", True, Choice.HELP),
        (None, True, Choice.QUIT),  # end of input
        ("x", True, None),
        ("yy", True, None),
    ],
)
def test_parse_answer(text, safe, expected):
    assert parse_answer(text, safe) is expected


def test_decide_yes_no():
    assert decide([[True, True]], ["y", "n"]) == [[A, R]]


def test_decide_defaults_follow_safety():
    assert decide([[True, False, True]], ["", "", ""]) == [[A, R, A]]


def test_decide_accept_rest_of_file_only():
    assert decide([[True, False, True], [True, True]], ["n", "a", "n", "y"]) == [[R, A, A], [R, A]]


def test_decide_reject_rest_of_file_only():
    assert decide([[True, True, True], [False]], ["y", "d", "y"]) == [[A, R, R], [A]]


def test_decide_quit_leaves_everything_after():
    assert decide([[True, True, True], [True]], ["y", "q"]) == [[A, L, L], [L]]


def test_decide_end_of_input_is_quit():
    assert decide([[True, True], [True]], ["y"]) == [[A, L], [L]]


def test_decide_help_and_unknown_answers_ask_again():
    assert decide([[True, True]], ["?", "what", "n", "?", "y"]) == [[R, A]]


def test_line_map_follows_shifts_and_rewrites():
    before = b"a\nb\nc\nd\n"
    after = b"import torch\na\nB\nc\nd\n"  # one line added on top, one rewritten
    moved = line_map(before, after)
    assert [moved(i) for i in (1, 2, 3, 4)] == [2, 3, 4, 5]
    deleted = line_map(b"a\nb\nc\n", b"a\nc\n")
    assert [deleted(i) for i in (1, 2, 3)] == [1, 2, 2]


def _finding(code: str, line: int, fixable: bool = True) -> Finding:
    fix = Fix(edits=(), safety=Safety.SAFE) if fixable else None
    return Finding(code, "m", "p.py", line, 1, line, 1, fix=fix)


def test_undecided_is_a_multiset_and_skips_unfixable():
    fs = [_finding("FR002", 3), _finding("FR002", 3), _finding("FR001", 3), _finding("FR002", 5, fixable=False)]
    assert undecided(fs, [("FR002", 3)]) == [fs[1], fs[2]]
    assert undecided(fs, [("FR002", 3), ("FR002", 3), ("FR001", 3)]) == []


# --------------------------------------------------------------------------
# the session, driven through streams
# --------------------------------------------------------------------------


# the unsafe samples here are FR001 without evidence: reported with --unproven
def _session(paths, answers, settings=Settings(unproven=True), inp=None):
    out = io.StringIO()
    session = Session(settings, inp or io.StringIO(answers), out, color=False)
    tally = session.review(run(paths, settings).results)
    return tally, out.getvalue(), session


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_session_yes_then_no_writes_exactly_the_first_fix(tmp_path):
    path = _write(tmp_path, "two.py", TWO)
    tally, out, _ = _session([path], "y\nn\n")
    assert open(path).read() == TWO_FIRST
    assert (tally.accepted, tally.rejected, tally.left, tally.files_written) == (1, 1, 0, 1)
    assert out.count("Apply this fix [Y,n,a,d,q,?]?") == 2


def test_session_no_then_yes_writes_exactly_the_second_fix(tmp_path):
    path = _write(tmp_path, "two.py", TWO)
    _session([path], "n\ny\n")
    assert open(path).read() == TWO_SECOND


def test_session_rejecting_everything_writes_nothing(tmp_path):
    path = _write(tmp_path, "two.py", TWO)
    before = os.stat(path).st_mtime_ns
    tally, _, _ = _session([path], "n\nn\n")
    assert open(path).read() == TWO and os.stat(path).st_mtime_ns == before
    assert tally.files_written == 0


def test_session_defaults_accept_safe_and_reject_unsafe(tmp_path):
    path = _write(tmp_path, "mixed.py", MIXED)
    tally, out, _ = _session([path], "\n\n")
    assert "[y,N,a,d,q,?]" in out and "[Y,n,a,d,q,?]" in out
    assert "UNSAFE" in out
    text = open(path).read()
    assert "dynamic=False" in text and "torch._dynamo.graph_break()" in text
    assert (tally.accepted, tally.rejected) == (1, 1)


def test_session_dependent_fixes_are_recomputed_on_the_accepted_code(tmp_path):
    path = _write(tmp_path, "same.py", SAME)
    tally, out, _ = _session([path], "y\ny\n")
    fixed = process_source(path, "same.py", SAME.encode(), Settings(unproven=True)).new.decode()
    assert open(path).read() == fixed
    assert fixed.count("torch._dynamo.graph_break()") == 2 and fixed.count("import torch") == 1
    # the second diff is shown against the accepted state: the first call is context
    second = out.split("(2/2)")[1]
    assert "\n     torch._dynamo.graph_break()\n" in second
    assert "+import torch" not in second
    assert tally.accepted == 2


def test_session_rejected_finding_is_not_offered_again_after_lines_shift(tmp_path):
    # accepting the second marker adds `import torch` on top: every line moves
    path = _write(tmp_path, "same.py", SAME)
    tally, out, _ = _session([path], "n\ny\n")
    text = open(path).read()
    assert out.count("Apply this fix") == 2
    assert text.startswith("import torch\n")
    assert text.count("# fix-recompiles: graph-break") == 1 and text.count("graph_break()") == 1
    assert (tally.accepted, tally.rejected, tally.left) == (1, 1, 0)


def test_session_quit_keeps_accepted_and_leaves_the_rest(tmp_path):
    a = _write(tmp_path, "a.py", TWO)
    b = _write(tmp_path, "b.py", TWO)
    tally, _, _ = _session([a, b], "y\nq\n")
    assert open(a).read() == TWO_FIRST and open(b).read() == TWO
    assert (tally.accepted, tally.rejected, tally.left) == (1, 0, 3)


def test_session_end_of_input_is_quit(tmp_path):
    path = _write(tmp_path, "two.py", TWO)
    tally, _, _ = _session([path], "y\n")
    assert open(path).read() == TWO_FIRST
    assert (tally.accepted, tally.left) == (1, 1)


def test_session_accept_and_reject_rest_of_file(tmp_path):
    a = _write(tmp_path, "a.py", TWO)
    b = _write(tmp_path, "b.py", TWO)
    tally, out, _ = _session([a, b], "a\nd\n")
    assert open(a).read() == TWO_BOTH and open(b).read() == TWO
    assert (tally.accepted, tally.rejected, tally.left) == (2, 2, 0)
    assert out.count("Apply this fix") == 2


def test_session_help_prints_the_rule_explanation_and_asks_again(tmp_path):
    path = _write(tmp_path, "two.py", TWO)
    _, out, _ = _session([path], "?\nbogus\ny\nn\n")
    assert "## Why it recompiles" in out and "a - accept this fix and all remaining" in out
    assert "unknown answer 'bogus'" in out
    assert open(path).read() == TWO_FIRST


class _EditingInput(io.StringIO):
    """Changes the file behind the session's back at the first prompt."""

    def __init__(self, text, path):
        super().__init__(text)
        self.path = path

    def readline(self, *args):
        if self.path:
            with open(self.path, "a") as fh:
                fh.write("# edited meanwhile\n")
            self.path = None
        return super().readline(*args)


def test_session_does_not_overwrite_a_file_changed_during_review(tmp_path):
    path = _write(tmp_path, "two.py", TWO)
    tally, _, _ = _session([path], None, inp=_EditingInput("y\ny\n", path))
    assert open(path).read() == TWO + "# edited meanwhile\n"
    assert tally.errors and "changed on disk" in tally.errors[0][1]
    assert (tally.accepted, tally.left, tally.files_written) == (0, 2, 0)


# -- the finding filter hook (trace-guided -i narrows the findings with it) --


def _filtered_session(paths, answers, finding_filter):
    out = io.StringIO()
    session = Session(Settings(unproven=True), io.StringIO(answers), out, color=False, finding_filter=finding_filter)
    tally = session.review(run(paths, Settings(unproven=True)).results)
    return tally, out.getvalue()


def test_filter_narrows_what_is_offered(tmp_path):
    path = _write(tmp_path, "two.py", TWO)
    seen = []

    def only_last(ctx, findings):
        seen.append([f.line for f in findings])
        return findings[-1:]

    tally, out = _filtered_session([path], "y\n", only_last)
    assert open(path).read() == TWO_SECOND  # the first marker was never offered first
    assert "(1/1) " + path + ":8:" in out
    # called on the file as read, then again on the accepted code: the second
    # marker is gone, the first is what the filter keeps now, offered next
    # (input ended there)
    assert seen == [[6, 8], [6]]
    assert "(2/2) " + path + ":6:" in out
    assert (tally.accepted, tally.left) == (1, 1)


def test_filter_can_rewrite_findings(tmp_path):
    import dataclasses

    path = _write(tmp_path, "mixed.py", MIXED)

    def upgrade(ctx, findings):
        return [
            dataclasses.replace(f, fix=dataclasses.replace(f.fix, safety=Safety.SAFE), message=f.message + " (upgraded)")
            if f.code == "FR001"
            else f
            for f in findings
        ]

    tally, out = _filtered_session([path], "\n\n", upgrade)
    # the FR001 fix is shown (and defaults) as safe now: Enter accepts both
    assert "[y,N,a,d,q,?]" not in out and "(upgraded)" in out
    assert "dynamic=False" not in open(path).read()
    assert tally.accepted == 2


def test_filter_applies_to_files_left_after_quit(tmp_path):
    a = _write(tmp_path, "a.py", TWO)
    b = _write(tmp_path, "b.py", TWO)
    tally, _ = _filtered_session([a, b], "q\n", lambda ctx, findings: findings[:1])
    # a.py: its one offered fix left at the prompt; b.py: one (filtered), not two
    assert (tally.accepted, tally.left) == (0, 2)


def test_run_interactive_files_restricts_the_review(tmp_path):
    from codemods.modes.interactive import run_interactive

    a = _write(tmp_path, "a.py", TWO)
    b = _write(tmp_path, "b.py", TWO)
    out = io.StringIO()
    code = run_interactive([str(tmp_path)], Settings(unproven=True), io.StringIO("a\n"), out, io.StringIO(), files=[b])
    assert code == 0 and open(b).read() == TWO_BOTH and open(a).read() == TWO
    assert "a.py" not in out.getvalue()


# --------------------------------------------------------------------------
# the real program in a pseudo-terminal
# --------------------------------------------------------------------------

PROMPT = r"Apply this fix \[[Yy],[Nn],a,d,q,\?\]\? "


def terminal_signals() -> None:
    """In the spawned child, before exec: Ctrl-C as a user's terminal gives
    it (default SIGINT, not blocked).  An ignored or blocked SIGINT survives
    exec, and the test process may carry one (a CI run saw both Ctrl-C tests
    of one xdist worker time out: the child never got the signal)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])


def _spawn(args, cwd, color=False):
    env = dict(os.environ)
    env.pop("NO_COLOR", None)
    if not color:
        env["NO_COLOR"] = "1"
    return pexpect.spawn(
        sys.executable, [CLI, "-i", "--unproven", *args], cwd=str(cwd), env=env, encoding="utf-8", timeout=60,
        dimensions=(60, 200), preexec_fn=terminal_signals,
    )


def _finish(child):
    child.expect(pexpect.EOF)
    tail = child.before
    child.close()
    return tail, child.exitstatus


def test_pty_yes_then_no_writes_exactly_the_first_fix(tmp_path):
    _write(tmp_path, "two.py", TWO)
    child = _spawn(["two.py"], tmp_path)
    child.expect(PROMPT)
    assert "+    torch._dynamo.graph_break()" in child.before
    child.sendline("y")
    child.expect(PROMPT)
    child.sendline("n")
    tail, status = _finish(child)
    assert (tmp_path / "two.py").read_text() == TWO_FIRST
    assert "1 fix accepted, 1 rejected, 0 left (1 file written)." in tail
    assert status == 1  # a finding remains


def test_pty_quit_at_the_second_fix_keeps_the_first(tmp_path):
    _write(tmp_path, "two.py", TWO)
    child = _spawn(["two.py"], tmp_path)
    child.expect(PROMPT)
    child.sendline("y")
    child.expect(PROMPT)
    child.sendline("q")
    tail, status = _finish(child)
    assert (tmp_path / "two.py").read_text() == TWO_FIRST
    assert "1 fix accepted, 0 rejected, 1 left" in tail
    assert status == 1


def test_pty_accept_all_then_reject_rest(tmp_path):
    _write(tmp_path, "a.py", TWO)
    _write(tmp_path, "b.py", TWO)
    child = _spawn(["."], tmp_path)
    child.expect(PROMPT)
    child.sendline("a")
    child.expect(PROMPT)
    assert "b.py" in child.before
    child.sendline("d")
    tail, status = _finish(child)
    assert (tmp_path / "a.py").read_text() == TWO_BOTH
    assert (tmp_path / "b.py").read_text() == TWO
    assert "2 fixes accepted, 2 rejected, 0 left" in tail
    assert status == 1


def test_pty_all_accepted_exits_zero(tmp_path):
    _write(tmp_path, "two.py", TWO)
    child = _spawn(["two.py"], tmp_path)
    child.expect(PROMPT)
    child.sendline("")
    child.expect(PROMPT)
    child.sendline("")
    tail, status = _finish(child)
    assert (tmp_path / "two.py").read_text() == TWO_BOTH
    assert status == 0


def test_pty_ctrl_c_keeps_accepted_fixes(tmp_path):
    _write(tmp_path, "two.py", TWO)
    child = _spawn(["two.py"], tmp_path)
    child.expect(PROMPT)
    child.sendline("y")
    child.expect(PROMPT)
    child.sendintr()
    tail, status = _finish(child)
    assert (tmp_path / "two.py").read_text() == TWO_FIRST
    assert "1 fix accepted, 0 rejected, 1 left" in tail
    assert "Traceback" not in tail


def test_pty_ctrl_c_at_first_prompt_writes_nothing(tmp_path):
    _write(tmp_path, "two.py", TWO)
    child = _spawn(["two.py"], tmp_path)
    child.expect(PROMPT)
    child.sendintr()
    tail, _ = _finish(child)
    assert (tmp_path / "two.py").read_text() == TWO
    assert "0 fixes accepted, 0 rejected, 2 left (0 files written)." in tail


def test_pty_end_of_input_keeps_accepted_fixes(tmp_path):
    _write(tmp_path, "two.py", TWO)
    child = _spawn(["two.py"], tmp_path)
    child.expect(PROMPT)
    child.sendline("y")
    child.expect(PROMPT)
    child.sendeof()
    tail, status = _finish(child)
    assert (tmp_path / "two.py").read_text() == TWO_FIRST
    assert "1 fix accepted, 0 rejected, 1 left" in tail


def test_pty_overlapping_fixes(tmp_path):
    _write(tmp_path, "same.py", SAME)
    child = _spawn(["same.py"], tmp_path)
    child.expect(PROMPT)
    child.sendline("y")
    child.expect(PROMPT)
    shown = child.before
    child.sendline("y")
    _, status = _finish(child)
    fixed = process_source("same.py", "same.py", SAME.encode(), Settings(unproven=True)).new.decode()
    assert (tmp_path / "same.py").read_text() == fixed
    assert "\n     torch._dynamo.graph_break()" in shown.replace("\r\n", "\n")  # context, not a second insert
    assert status == 0


def test_pty_unsafe_fix_defaults_to_no_and_is_marked(tmp_path):
    _write(tmp_path, "mixed.py", MIXED)
    child = _spawn(["mixed.py"], tmp_path)
    child.expect(r"Apply this fix \[y,N,a,d,q,\?\]\? ")
    assert "UNSAFE fix" in child.before and "FR001" in child.before
    child.sendline("")
    child.expect(r"Apply this fix \[Y,n,a,d,q,\?\]\? ")
    child.sendline("")
    _finish(child)
    text = (tmp_path / "mixed.py").read_text()
    assert "dynamic=False" in text and "torch._dynamo.graph_break()" in text


def test_pty_colours_only_in_a_terminal(tmp_path):
    _write(tmp_path, "two.py", TWO)
    child = _spawn(["two.py"], tmp_path, color=True)
    child.expect(PROMPT)
    assert "\x1b[32m+    torch._dynamo.graph_break()" in child.before
    child.sendline("q")
    _finish(child)


def test_non_tty_stdin_is_refused(tmp_path):
    _write(tmp_path, "two.py", TWO)
    proc = subprocess.run([sys.executable, CLI, "-i", "two.py"], cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "terminal" in proc.stderr and "--diff" in proc.stderr and "--fix" in proc.stderr
    assert (tmp_path / "two.py").read_text() == TWO


@pytest.mark.parametrize("other", ["--diff", "--fix"])
def test_interactive_is_exclusive_with_diff_and_fix(tmp_path, other):
    _write(tmp_path, "two.py", TWO)
    proc = subprocess.run([sys.executable, CLI, "-i", other, "two.py"], cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "exclusive" in proc.stderr
    assert (tmp_path / "two.py").read_text() == TWO


def test_run_interactive_reviews_good_files_and_reports_bad_ones(tmp_path):
    from codemods.modes.interactive import run_interactive

    _write(tmp_path, "bad.py", "def f(:\n    # fix-recompiles: graph-break\n")
    good = _write(tmp_path, "good.py", TWO)
    out, err = io.StringIO(), io.StringIO()
    code = run_interactive([str(tmp_path)], Settings(unproven=True), io.StringIO("y\ny\n"), out, err)
    assert code == 2
    assert "bad.py" in err.getvalue() and "syntax error" in err.getvalue()
    assert open(good).read() == TWO_BOTH
    assert "2 fixes accepted, 0 rejected, 0 left (1 file written)." in out.getvalue()
    assert "\x1b[" not in out.getvalue()  # a StringIO is not a terminal: no colours


def test_run_interactive_exit_codes(tmp_path):
    from codemods.modes.interactive import run_interactive

    path = _write(tmp_path, "two.py", TWO)
    assert run_interactive([path], Settings(unproven=True), io.StringIO("y\nn\n"), io.StringIO(), io.StringIO()) == 1
    assert run_interactive([path], Settings(unproven=True), io.StringIO("y\n"), io.StringIO(), io.StringIO()) == 0
    assert open(path).read() == TWO_BOTH
    # nothing left to review: no prompt, exit 0
    out = io.StringIO()
    assert run_interactive([path], Settings(unproven=True), io.StringIO(""), out, io.StringIO()) == 0
    assert "Apply this fix" not in out.getvalue()


@pytest.mark.parametrize("source", [TWO, SAME, MIXED], ids=["two", "same", "mixed"])
@pytest.mark.parametrize("answers", ["y\ny\n", "y\nn\n", "n\ny\n", "n\nn\n", "a\n", "d\n"])
def test_what_is_shown_is_what_is_written(tmp_path, monkeypatch, source, answers):
    path = _write(tmp_path, "f.py", source)
    shown = []
    original_show = Session._show

    def spy(self, f, safe, k, n, state, after):
        shown.append((state.data, after))
        return original_show(self, f, safe, k, n, state, after)

    monkeypatch.setattr(Session, "_show", spy)
    tally, _, _ = _session([path], answers)
    asked = [a for a in answers.split("\n") if a]
    assert len(shown) == len(asked)
    state = source.encode()
    for (before, after), answer in zip(shown, asked):
        assert before == state  # each fix is shown on the accepted state
        if answer in ("y", "a"):
            state = after
    if answers == "a\n":  # the rest was accepted without a prompt: the file is fully fixed
        state = process_source(path, "f.py", source.encode(), Settings(unsafe_fixes=True, unproven=True)).new
    assert open(path, "rb").read() == state


def test_session_accepting_a_fix_that_imports_a_module_adds_the_import(tmp_path):
    """FR019's fix names `functools` (Fix.imports): what is shown and
    written when it is accepted has `import functools`, and parses."""
    import ast

    text = (
        "import torch\nfrom torch import nn\n\n\ndef rot_class():\n    class Rot(nn.Linear):\n        pass\n\n    return Rot\n\n\n"
        "blocks = [nn.Sequential(nn.Linear(2, 2)) for _ in range(3)]\nfor b in blocks:\n    b[0].__class__ = rot_class()\n    step = torch.compile(b)\n"
    )
    path = _write(tmp_path, "rot.py", text)
    tally, out, _ = _session([path], "y\n", settings=Settings())
    written = open(path).read()
    assert tally.accepted == 1 and "import functools" in written and "@functools.lru_cache(maxsize=None)\ndef rot_class():" in written
    assert "+import functools" in out
    ast.parse(written)
