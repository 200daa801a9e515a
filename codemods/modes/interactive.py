"""``fix-recompiles -i``: review every proposed fix one at a time, like ``git add -p``.

Three layers, each testable on its own:

* the decision logic (pure): :func:`parse_answer` turns what the user typed into a
  :class:`Choice`; :class:`FileDecisions` turns choices into verdicts and
  remembers ``a`` / ``d`` / ``q``; :func:`decide` runs a whole answer script over
  files of fixes without any I/O;
* :func:`line_map` (pure): where a line of a file lands after a fix, used to
  recognise an already decided finding after the file was re-analysed;
* :class:`Session`, the I/O layer: input and output are streams, so tests drive
  it without a terminal; the CLI passes ``sys.stdin`` / ``sys.stdout``.

What is shown is what is written.  For each fix the session renders the file as
accepted so far with and without that one fix (``engine.render``) and shows the
difference; on ``y`` the rendered bytes become the new state of the file, which
is analysed again, so a later fix that overlaps or depends on an accepted one is
recomputed on the accepted code instead of applied blindly.  A file's accepted
fixes are written (atomically) when the file is done, on ``q``, Ctrl-C or end of
input; nothing else is written.

A *finding filter* (``(ctx, findings) -> findings``) narrows or rewrites what is
offered; it is applied after every (re-)analysis of a file, so it sees the
accepted code.  Trace-guided fixing (``codemods.trace_run``) passes one that
keeps only the findings a trace implicates and upgrades their safety; the
default is the identity.  A filter with an ``evidence(path, data)`` method also
hands the analysis what the trace observed (``FileContext.evidence``: floats
the source cannot show).
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import os
import signal
import threading
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence, TextIO, Tuple

import typer

from ..analysis.context import Settings
from ..pipeline.engine import FileResult, analyze, read_file, render
from ..findings import FileError, Finding, Safety
from .output import unified_diff
from ..analysis.lines import line_map  # noqa: F401  (interactive.line_map: the review's own use and the trace's)
from ..pipeline.notebook import Notebook, is_notebook
from ..pipeline.selection import FileSelection
from ..pipeline.writer import write_atomic

#: ``(ctx, findings) -> findings``: applied after every analysis of a file
FindingFilter = Callable[[object, List[Finding]], List[Finding]]

# --------------------------------------------------------------------------
# decision logic (pure)
# --------------------------------------------------------------------------


class Choice(enum.Enum):
    YES = "y"
    NO = "n"
    ALL = "a"  # accept this and the rest of the file
    DONE = "d"  # reject this and the rest of the file
    QUIT = "q"
    HELP = "?"


class Verdict(str, enum.Enum):
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    #: never decided (the user quit before it)
    LEFT = "left"


_WORDS: Dict[str, Choice] = {
    "y": Choice.YES,
    "yes": Choice.YES,
    "n": Choice.NO,
    "no": Choice.NO,
    "a": Choice.ALL,
    "all": Choice.ALL,
    "d": Choice.DONE,
    "done": Choice.DONE,
    "q": Choice.QUIT,
    "quit": Choice.QUIT,
    "?": Choice.HELP,
    "h": Choice.HELP,
    "help": Choice.HELP,
}

HELP_TEXT = """\
y - accept this fix
n - reject this fix
a - accept this fix and all remaining fixes in this file
d - reject this fix and all remaining fixes in this file
q - quit; fixes accepted so far are written, nothing else
? - print this help and the rule's explanation
Enter takes the default shown in capitals (yes for safe fixes, no for unsafe ones).
"""


def default_choice(safe: bool) -> Choice:
    return Choice.YES if safe else Choice.NO


def prompt_keys(safe: bool) -> str:
    """``[Y,n,a,d,q,?]`` for a safe fix, ``[y,N,a,d,q,?]`` for an unsafe one."""
    return "[Y,n,a,d,q,?]" if safe else "[y,N,a,d,q,?]"


def parse_answer(text: Optional[str], safe: bool) -> Optional[Choice]:
    """What the user typed → a choice; ``None`` (end of input) is QUIT, an empty
    line is the default, anything unknown is ``None`` (ask again)."""
    if text is None:
        return Choice.QUIT
    word = text.strip().lower()
    if not word:
        return default_choice(safe)
    return _WORDS.get(word)


@dataclass
class FileDecisions:
    """The verdicts of one file, with ``a`` / ``d`` / ``q`` remembered."""

    #: set by ``a`` or ``d``: the verdict of every later fix of this file
    rest: Optional[Verdict] = None
    quit: bool = False
    verdicts: List[Verdict] = field(default_factory=list)

    def automatic(self) -> Optional[Verdict]:
        """The verdict of the next fix if no question is needed, else None."""
        if self.quit:
            return Verdict.LEFT
        return self.rest

    def answer(self, choice: Choice) -> Verdict:
        """Record ``choice`` (never HELP) for the current fix; returns its verdict."""
        if choice is Choice.HELP:
            raise ValueError("HELP decides nothing")
        if choice is Choice.QUIT:
            self.quit = True
            verdict = Verdict.LEFT
        elif choice in (Choice.YES, Choice.ALL):
            verdict = Verdict.ACCEPTED
        else:
            verdict = Verdict.REJECTED
        if choice is Choice.ALL:
            self.rest = Verdict.ACCEPTED
        elif choice is Choice.DONE:
            self.rest = Verdict.REJECTED
        self.verdicts.append(verdict)
        return verdict

    def record(self, verdict: Verdict) -> Verdict:
        self.verdicts.append(verdict)
        return verdict


def decide(files: Sequence[Sequence[bool]], answers: Iterable[Optional[str]]) -> List[List[Verdict]]:
    """Run an answer script over files of fixes (``True`` = safe fix), without I/O.

    Every answer is a line as typed (``""`` takes the default); running out of
    answers is end of input (quit).  Unknown answers and ``?`` ask again.
    ``q`` leaves every later fix of every file undecided.
    """
    script: Iterator[Optional[str]] = iter(answers)
    out: List[List[Verdict]] = []
    quit = False
    for safeties in files:
        state = FileDecisions(quit=quit)
        for safe in safeties:
            auto = state.automatic()
            if auto is not None:
                state.record(auto)
                continue
            while True:
                choice = parse_answer(next(script, None), safe)
                if choice is not None and choice is not Choice.HELP:
                    break
            state.answer(choice)
        quit = state.quit
        out.append(state.verdicts)
    return out


# --------------------------------------------------------------------------
# following findings across re-analysis (pure)
# --------------------------------------------------------------------------


Key = Tuple[str, int]


def finding_key(f: Finding) -> Key:
    """A finding's identity across re-analysis: its rule and line (the message
    may mention things the accepted fixes changed)."""
    return (f.code, f.line)


def undecided(findings: Sequence[Finding], decided: Sequence[Key]) -> List[Finding]:
    """Fixable findings whose key is not in ``decided`` (a multiset: two
    decided keys hide the first two findings with that key)."""
    budget: Dict[Key, int] = {}
    for key in decided:
        budget[key] = budget.get(key, 0) + 1
    out: List[Finding] = []
    for f in findings:
        if f.fix is None:
            continue
        key = finding_key(f)
        if budget.get(key, 0) > 0:
            budget[key] -= 1
            continue
        out.append(f)
    return out


def provider_order(results: Sequence[FileResult]) -> List[FileResult]:
    """``results`` with each file before the files whose fixes rest on its
    fixes (:attr:`Fix.rests_on`: a `.fill_` of an lr another file makes a
    tensor), else in their order; a cycle keeps the order it meets."""
    at = {r.path: i for i, r in enumerate(results)}
    needs = {
        r.path: sorted({at[p] for f in r.findings if f.fix is not None for p, _ in f.fix.rests_on if p in at and p != r.path})
        for r in results
    }
    out: List[FileResult] = []
    placed: set = set()

    def place(i: int, visiting: set) -> None:
        if i in placed or i in visiting:
            return
        visiting.add(i)
        for j in needs[results[i].path]:
            place(j, visiting)
        placed.add(i)
        out.append(results[i])

    for i in range(len(results)):
        place(i, set())
    return out


# --------------------------------------------------------------------------
# the I/O layer
# --------------------------------------------------------------------------


@dataclass
class Tally:
    accepted: int = 0
    rejected: int = 0
    left: int = 0
    files_written: int = 0
    #: findings that have no automatic fix (only listed, never offered)
    unfixable: int = 0
    errors: List[Tuple[str, str]] = field(default_factory=list)
    #: (path, display path, bytes before the review) of every file written
    written: List[Tuple[str, str, bytes]] = field(default_factory=list)

    def count(self, verdict: Verdict, n: int = 1) -> None:
        if verdict is Verdict.ACCEPTED:
            self.accepted += n
        elif verdict is Verdict.REJECTED:
            self.rejected += n
        else:
            self.left += n


@contextlib.contextmanager
def _no_interrupt():
    """Hold Ctrl-C back while a file is written; re-raise it afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    hit: List[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: hit.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if hit:
        raise KeyboardInterrupt


@dataclass
class _FileState:
    result: FileResult
    data: bytes
    encoding: str = "utf-8"
    accepted: int = 0
    ctx: object = None
    #: fixes still open in this file (counted as left if the user interrupts)
    open: int = 0
    #: a notebook's cells (``data`` is then their module: codemods/pipeline/notebook.py)
    notebook: object = None


class Session:
    """One interactive review over the results of :func:`codemods.pipeline.runner.run`."""

    def __init__(
        self,
        settings: Settings,
        inp: TextIO,
        out: TextIO,
        *,
        err: Optional[TextIO] = None,
        color: bool = False,
        project=None,
        finding_filter: Optional[FindingFilter] = None,
        selection: FileSelection = FileSelection(),
    ) -> None:
        self.settings = settings
        self.selection = selection
        self.finding_filter = finding_filter
        self.inp = inp
        self.out = out
        self.err = err if err is not None else out
        self.color = color
        self.project = project
        self.tally = Tally()
        self.quit = False
        self.prepared: Dict[str, Tuple[object, List[Finding]]] = {}
        #: the files reviewed so far, and (path, rule code) of each fix not applied there
        self.reviewed: set = set()
        self.declined: set = set()
        #: path -> display path of every file of the plan
        self.shown_as: Dict[str, str] = {}

    # output helpers -------------------------------------------------------
    def _style(self, text: str, **kw) -> str:
        return typer.style(text, **kw) if self.color else text

    def _say(self, text: str = "") -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def _error(self, path: str, reason: str) -> None:
        self.tally.errors.append((path, reason))
        self.err.write(f"error: {path}: {reason}\n")
        self.err.flush()

    def _diff(self, display_path: str, before: str, after: str) -> str:
        lines = []
        for line in unified_diff(display_path, before, after, context=3).splitlines():
            if line.startswith(("---", "+++")):
                lines.append(self._style(line, bold=True))
            elif line.startswith("@@"):
                lines.append(self._style(line, fg=typer.colors.CYAN))
            elif line.startswith("+"):
                lines.append(self._style(line, fg=typer.colors.GREEN))
            elif line.startswith("-"):
                lines.append(self._style(line, fg=typer.colors.RED))
            else:
                lines.append(line)
        return "\n".join(lines)

    def _ask(self, safe: bool, f: Finding) -> Choice:
        """Prompt until a deciding answer; end of input and Ctrl-C are QUIT."""
        while True:
            self.out.write(self._style(f"Apply this fix {prompt_keys(safe)}? ", fg=typer.colors.BLUE, bold=True))
            self.out.flush()
            try:
                line = self.inp.readline()
            except KeyboardInterrupt:
                self._say()
                return Choice.QUIT
            if line == "":  # end of input
                self._say()
                return Choice.QUIT
            choice = parse_answer(line, safe)
            if choice is None:
                self._say(f"unknown answer {line.strip()!r}")
                self._say(HELP_TEXT.rstrip("\n"))
            elif choice is Choice.HELP:
                self._say(HELP_TEXT.rstrip("\n"))
                self._say()
                self._say(_rule_doc(f.code).rstrip("\n"))
                self._say()
            else:
                return choice

    # the walk -------------------------------------------------------------
    def review(self, results: Sequence[FileResult], prepared: Optional[Dict[str, Tuple[object, List[Finding]]]] = None) -> Tally:
        """Walk every fix of every result; returns the counts.  ``prepared``:
        by path, the analysis a file's findings come from (its context and
        the findings as the filter left them), so the review starts from it
        instead of analysing the file again."""
        self.prepared = dict(prepared or {})
        # a filter with evidence (a trace's) may find what the plain analysis did not
        evidence = getattr(self.finding_filter, "evidence", None) is not None
        self.shown_as = {r.path: r.display_path for r in results}
        for result in provider_order(results):
            if result.error or not (result.findings or (evidence and result.original)):
                self.reviewed.add(result.path)
                continue
            if self.quit:
                findings = self._unreviewed(result)
                self.tally.left += sum(1 for f in findings if f.fix is not None)
                self.tally.unfixable += sum(1 for f in findings if f.fix is None)
                continue
            try:
                self._review_file(result)
            except KeyboardInterrupt:
                self.quit = True
            self.reviewed.add(result.path)
        return self.tally

    def _review_file(self, result: FileResult) -> None:
        state = _FileState(result=result, data=result.original or b"", encoding=result.encoding)
        if is_notebook(result.path):
            # reviewed as the module of its code cells, shown and written back as cells
            try:
                state.notebook = Notebook(result.display_path, state.data)
            except FileError as exc:
                self._error(exc.path, exc.reason)
                return
            state.data = state.notebook.python  # type: ignore[attr-defined]
        try:
            self._walk(state)
        except KeyboardInterrupt:
            self._say()
            self.quit = True
            self.tally.left += state.open
        finally:
            self._write(state)

    def _unreviewed(self, result: FileResult) -> List[Finding]:
        """The findings a file never reviewed would have offered (filtered)."""
        if self.finding_filter is None or is_notebook(result.path):
            return list(result.findings)
        state = _FileState(result=result, data=result.original or b"", encoding=result.encoding)
        try:
            return self._analyze(state, state.data)
        except _Stop:
            return []

    def _analyze(self, state: _FileState, data: bytes) -> List[Finding]:
        result = state.result
        try:
            observed = getattr(self.finding_filter, "evidence", None)  # a trace's (TraceFilter)
            evidence = observed(result.path, data) if observed is not None else None
            settings = self.selection.settings_for(result.path, self.settings)  # per-file-ignores
            ctx, findings = analyze(result.path, result.display_path, data, settings, self.project, evidence=evidence)
        except FileError as exc:
            raise _Stop(exc.reason) from None
        except RecursionError:
            raise _Stop("file too deeply nested to analyse") from None
        except Exception as exc:  # noqa: BLE001 - a rule crashed: our bug; keep what was accepted
            raise _Stop(f"internal error: {type(exc).__name__}: {exc}") from None
        if ctx is None:
            return []
        state.encoding = ctx.module.encoding
        state.ctx = ctx
        if self.finding_filter is not None:
            try:
                findings = list(self.finding_filter(ctx, findings))
            except Exception as exc:  # noqa: BLE001 - the filter is our code: our bug
                raise _Stop(f"internal error: {type(exc).__name__}: {exc}") from None
        return findings

    def _walk(self, state: _FileState) -> None:
        result = state.result
        prepared = self.prepared.get(result.path)
        if prepared is not None and prepared[0] is not None:
            state.ctx, findings = prepared[0], list(prepared[1])
            state.encoding = state.ctx.module.encoding  # type: ignore[attr-defined]
        else:
            try:
                findings = self._analyze(state, state.data)
            except _Stop as stop:
                self._error(result.display_path, stop.reason)
                return
        self.tally.unfixable += sum(1 for f in findings if f.fix is None)
        decided: List[Key] = []
        decisions = FileDecisions()
        shown = 0
        header_done = False
        # a fix whose result has a new finding is offered too; never loop for ever
        limit = 4 * len(undecided(findings, decided)) + 16
        while True:
            pending = undecided(findings, decided)
            state.open = len(pending)
            if not pending:
                return
            if shown >= limit:
                self._error(result.display_path, "internal error: the fixes keep producing new findings; review stopped")
                self.tally.left += len(pending)
                return
            f = pending[0]
            missing = self._missing(f)
            if missing is not None:
                # its other half was not applied: on its own it would crash
                path, code = missing
                self._say(
                    f"  not offered: {self._where(f, state, column=False)}: {f.code} {_fix_title(f)}: it needs the {code} fix"
                    f" of {self.shown_as.get(path, path)}, which was not applied"
                )
                decided.append(finding_key(f))
                self.declined.add((result.path, f.code))
                self.tally.left += 1
                continue
            try:
                after = render(state.ctx, [f], state.data)
            except FileError as exc:
                # our bug, not the user's: skip this fix, keep going
                self._error(result.display_path, f"{f.code} at line {f.line}: {exc.reason}")
                decided.append(finding_key(f))
                self.tally.left += 1
                state.open -= 1
                continue
            if after == state.data:  # the fix became a no-op on the accepted code
                decided.append(finding_key(f))
                continue
            safe = f.fix.safety == Safety.SAFE
            shown += 1
            verdict = decisions.automatic()
            if verdict is None:
                if not header_done:
                    self._say(self._style(f"==> {result.display_path}", bold=True))
                    header_done = True
                self._show(f, safe, shown, shown + len(pending) - 1, state, after)
                choice = self._ask(safe, f)
                verdict = decisions.answer(choice)
            else:
                decisions.record(verdict)
                word = "accepted" if verdict is Verdict.ACCEPTED else "rejected"
                self._say(f"  {word}: {self._where(f, state, column=False)}: {f.code} {_fix_title(f)}{'' if safe else ' (UNSAFE)'}")
            self.tally.count(verdict, 1 if verdict is not Verdict.LEFT else len(pending))
            state.open = 0 if verdict is Verdict.LEFT else state.open - 1
            if verdict is Verdict.LEFT:
                self.quit = True
                return
            if verdict is Verdict.REJECTED:
                decided.append(finding_key(f))
                self.declined.add((result.path, f.code))
                continue
            # accepted: the rendered bytes become the file; analyse them again
            moved = line_map(state.data, after)
            decided = [(code, moved(line)) for code, line in decided]
            decided.append((f.code, moved(f.line)))
            state.data = after
            state.accepted += 1
            try:
                findings = self._analyze(state, after)
            except _Stop as stop:  # our bug (render() checked the result parses); keep what was accepted
                self._error(result.display_path, stop.reason)
                self.tally.left += state.open
                state.open = 0
                return

    def _missing(self, f: Finding) -> Optional[Tuple[str, str]]:
        """(path, rule code) of fixes of another file ``f``'s fix rests on
        that were not all applied (that file not reviewed yet, or a fix of
        that code rejected or not offered there); None when all were."""
        for need in f.fix.rests_on if f.fix is not None else ():
            if need[0] not in self.reviewed or need in self.declined:
                return need
        return None

    @staticmethod
    def _placed(f: Finding, state: _FileState) -> Finding:
        """``f`` as the user reads it: in a notebook, in its cell (a copy:
        the review keeps the module's lines)."""
        if state.notebook is None:
            return f
        shown = dataclasses.replace(f)
        state.notebook.place(shown)  # type: ignore[attr-defined]
        return shown

    def _where(self, f: Finding, state: _FileState, column: bool = True) -> str:
        p = self._placed(f, state)
        cell = f"cell {p.cell}:" if p.cell is not None else ""
        return f"{p.path}:{cell}{p.line}" + (f":{p.column}" if column else "")

    def _show(self, f: Finding, safe: bool, k: int, n: int, state: _FileState, after: bytes) -> None:
        where = self._style(f"{self._where(f, state)}:", bold=True)
        self._say(f"({k}/{n}) {where} {self._style(f.code, bold=True)} {self._placed(f, state).message}")
        if safe:
            kind = self._style("safe fix", fg=typer.colors.GREEN)
        else:
            kind = self._style("UNSAFE fix: may change behaviour or speed, review it", fg=typer.colors.RED, bold=True)
        title = _fix_title(f)
        self._say(f"  {kind}{': ' + title if title else ''}")
        if state.notebook is not None:
            # the cells the fix changes, each as the notebook holds it
            before_cells = state.notebook.cell_texts(state.data)  # type: ignore[attr-defined]
            after_cells = state.notebook.cell_texts(after)  # type: ignore[attr-defined]
            for index in sorted(after_cells):
                if after_cells[index] != before_cells.get(index):
                    self._say(self._diff(f"{f.path}:cell {index + 1}", before_cells.get(index, "") + "\n", after_cells[index] + "\n"))
            return
        before_text = state.data.decode(state.encoding, "replace")
        after_text = after.decode(state.encoding, "replace")
        self._say(self._diff(f.path, before_text, after_text))

    def _write(self, state: _FileState) -> None:
        if not state.accepted:
            return
        result = state.result
        with _no_interrupt():
            try:
                on_disk = read_file(result.path, result.display_path)
                if on_disk != result.original:
                    raise FileError(result.display_path, "changed on disk during the review; accepted fixes not written")
                data = state.notebook.with_python(state.data) if state.notebook is not None else state.data  # type: ignore[attr-defined]
                write_atomic(result.path, data, result.display_path)
            except FileError as exc:
                self._error(exc.path, exc.reason)
                self.tally.accepted -= state.accepted
                self.tally.left += state.accepted
                return
            self.tally.files_written += 1
            self.tally.written.append((result.path, result.display_path, result.original or b""))
            self._say(f"wrote {state.accepted} fix{'es' if state.accepted != 1 else ''} to {result.display_path}")

    def summary(self) -> List[str]:
        t = self.tally
        lines = [
            f"{t.accepted} fix{'es' if t.accepted != 1 else ''} accepted, {t.rejected} rejected, {t.left} left"
            f" ({t.files_written} file{'s' if t.files_written != 1 else ''} written)."
        ]
        if t.unfixable:
            lines.append(
                f"{t.unfixable} finding{'s have' if t.unfixable != 1 else ' has'} no automatic fix"
                " (list them with `fix-recompiles PATH`)."
            )
        return lines


class _Stop(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _fix_title(f: Finding) -> str:
    return f.fix.title if f.fix is not None and f.fix.title else ""


def _rule_doc(code: str) -> str:
    from ..transforms import BY_CODE

    rule = BY_CODE.get(code)
    return rule.doc() if rule is not None else f"{code}: no documentation\n"


# --------------------------------------------------------------------------
# entry point used by the CLI
# --------------------------------------------------------------------------


def run_interactive(
    paths: Sequence[str],
    settings: Settings,
    inp: TextIO,
    out: TextIO,
    err: TextIO,
    *,
    color: Optional[bool] = None,
    finding_filter: Optional[FindingFilter] = None,
    files: Optional[Sequence[str]] = None,
    selection: FileSelection = FileSelection(),
) -> int:
    """Compute every file's findings up front, then review them; the exit code
    (0 nothing left, 1 findings remain, 2 an error occurred).  ``color=None``:
    ANSI colours when ``out`` is a terminal and ``NO_COLOR`` is not set.
    ``finding_filter``: see the module docstring; ``files``: review exactly
    these files instead of discovering ``paths``."""
    return review_paths(
        paths, settings, inp, out, err, color=color, finding_filter=finding_filter, files=files, selection=selection
    )[0]


def review_paths(
    paths: Sequence[str],
    settings: Settings,
    inp: TextIO,
    out: TextIO,
    err: TextIO,
    *,
    color: Optional[bool] = None,
    finding_filter: Optional[FindingFilter] = None,
    files: Optional[Sequence[str]] = None,
    selection: FileSelection = FileSelection(),
) -> Tuple[int, Tally]:
    """:func:`run_interactive`, also returning the session's counts (which
    files were written, with their bytes before the review): the plan of
    ``paths`` (:func:`codemods.pipeline.runner.run`), then :func:`review_plan`."""
    from ..pipeline.runner import run

    try:
        # a report's plan: the fixes are rendered one at a time in the review
        result = run(list(files) if files is not None else paths, settings, selection=selection, render=False)
    except KeyboardInterrupt:
        err.write("Interrupted before any fix was shown; nothing written.\n")
        return 1, Tally()
    return review_plan(
        result.results, settings, inp, out, err, project=result.project, errors=result.errors,
        color=color, finding_filter=finding_filter, selection=selection,
    )


def review_plan(
    results: Sequence[FileResult],
    settings: Settings,
    inp: TextIO,
    out: TextIO,
    err: TextIO,
    *,
    project=None,
    errors: Sequence[Tuple[str, str]] = (),
    color: Optional[bool] = None,
    finding_filter: Optional[FindingFilter] = None,
    selection: FileSelection = FileSelection(),
    prepared: Optional[Dict[str, Tuple[object, List[Finding]]]] = None,
) -> Tuple[int, Tally]:
    """The interactive mode over a plan (the files' results, the project index
    they were analysed with, the errors met making it): review every fix, write
    the accepted ones; (exit code, the session's counts).  ``prepared``: see
    :meth:`Session.review`."""
    if color is None:
        isatty = getattr(out, "isatty", None)
        color = bool(isatty and isatty()) and not os.environ.get("NO_COLOR")
    for path, reason in errors:
        err.write(f"error: {path}: {reason}\n")
    err.flush()
    session = Session(settings, inp, out, err=err, color=color, project=project, finding_filter=finding_filter, selection=selection)
    tally = session.review(results, prepared)
    for line in session.summary():
        out.write(line + "\n")
    if errors or tally.errors:
        n = len(errors) + len(tally.errors)
        out.write(f"{n} file{'s' if n != 1 else ''} could not be processed (see above).\n")
    out.flush()
    if errors or tally.errors:
        return 2, tally
    return (1 if (tally.rejected or tally.left or tally.unfixable) else 0), tally
