"""Read a ``TORCH_TRACE`` folder (torch's structured trace, what tlparse reads)
and say, per compiled code object, how many graphs it compiled, why it
recompiled and whether it hit the recompile limit.

Pure functions over files: this module never imports torch.

The trace format (measured on torch 2.13): one file per process, each record
one line ``<glog prefix>] {json}``, optionally followed by a payload on lines
starting with a tab.  The records used here:

- ``{"str": [filename, index]}``: interns a filename for ``dynamo_start`` stacks;
- ``{"dynamo_start": {"stack": [{"line", "name", "filename": index, ...}]}, "frame_id", ...}``:
  the Python stack when dynamo started compiling frame ``frame_id``;
- ``{"dynamo_output_graph": {"sizes": {node: [size, ...]}}, "frame_id", ...}``:
  one FX graph compiled, with the sizes of its tensors (ints, or strings for
  symbolic sizes; the inputs named after their sources, ``l_x_``);
- ``{"compilation_metrics": {"co_name", "co_filename", "co_firstlineno",
  "recompile_reason", "fail_type", "fail_reason", ...}, "frame_id", ...}``: one
  compile attempt.  When the recompile limit is hit, the attempt's record has
  ``co_name`` None, ``fail_type`` "Unsupported" and a ``fail_reason`` that names
  the limit ("Dynamo recompile limit exceeded ... Limit type: recompile_limit").

Recompile reasons changed text between releases, so they are classified on
their structure (``<source> == <literal>``, ``tensor '<name>' size mismatch``)
and anything else is kept raw as cause "other".
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from dataclasses import dataclass, field
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple

from ..analysis.context import DEFAULT_RECOMPILE_LIMIT

from .causes import (  # noqa: F401  (the causes are read as tr.FLOAT_ARG ...)
    CuresCause,
    FLOAT_ARG,
    INT_ARG,
    TENSOR_SHAPE,
    PARAMETER_SHAPE,
    MODULE_INT_ATTR,
    OPTIMIZER_LR,
    GLOBAL,
    MODULE_FLOAT_ATTR,
    LENGTH,
    CLOSURE,
    RESUME_VALUE,
    BACKEND,
    IDENTITY,
    TYPE,
    NONE_CHECK,
    KEYS,
    KEYED_ENTRY,
    TRUTH,
    CONSTANT,
    TRAIN_EVAL,
    GRAD_MODE,
    AUTOCAST,
    GLOBAL_STATE,
    REQUIRES_GRAD,
    DTYPE,
    DEVICE,
    DISPATCH,
    RANK,
    LAYOUT,
    ALIASING,
    INVALIDATED,
    OTHER,
    CAUSES,
)

#: causes with one graph per value of something that takes few values (a
#: dtype, grad mode on/off, train/eval, which of a few functions or types):
#: "bounded, no fix needed" unless they hit the recompile limit
BOUNDED = frozenset(
    {
        IDENTITY,
        TYPE,
        NONE_CHECK,
        KEYS,
        TRUTH,
        CONSTANT,
        TRAIN_EVAL,
        GRAD_MODE,
        AUTOCAST,
        GLOBAL_STATE,
        REQUIRES_GRAD,
        DTYPE,
        DEVICE,
        DISPATCH,
        RANK,
        LAYOUT,
        ALIASING,
        INVALIDATED,
    }
)


#: why a bounded cause needs no fix: what its few graphs are one of each
BOUNDED_WHY: Dict[str, str] = {
    IDENTITY: "one graph per object passed (a few functions or modules)",
    TYPE: "one graph per type",
    NONE_CHECK: "one graph for None, one for a value",
    KEYS: "one graph per set of keys or attributes",
    TRUTH: "one graph per truth value",
    CONSTANT: "one graph per value",
    TRAIN_EVAL: "one graph for train, one for eval",
    GRAD_MODE: "one graph with grad, one without (no_grad, inference_mode)",
    AUTOCAST: "one graph per autocast state",
    GLOBAL_STATE: "one graph per global state",
    REQUIRES_GRAD: "one graph per requires_grad",
    DTYPE: "one graph per dtype",
    DEVICE: "one graph per device",
    DISPATCH: "one graph per set of dispatch keys",
    RANK: "one graph per number of dims",
    ALIASING: "one graph per way the inputs alias",
    INVALIDATED: "one graph each time the cache is thrown away",
}


@dataclass(frozen=True)
class Cure(CuresCause):
    """A rule that cures a cause: its declaration (:class:`~codemods.trace.
    causes.CuresCause`) with the rule's code.  ``upgrade``: an observed
    recompile of this cause is the evidence the rule lacks when it calls its
    fix unsafe, so a trace makes the fix safe.  Rules whose fixes are unsafe
    for behavioural reasons (a float used as a Python number, an lr the user
    overwrites) are not upgraded: a trace proves the recompile, not that the
    rewrite keeps the program's results."""

    code: str = ""


def cure_table() -> Dict[str, Tuple[Cure, ...]]:
    """cause -> the rules that cure it, best first: each rule declares the
    causes it cures (``Rule.cures``); a rule marked ``first`` leads, the
    others follow in registry order."""
    global _CURES
    if _CURES is None:
        from ..transforms import REGISTRY  # the rules import the causes: not at import time

        table: Dict[str, List[Tuple[bool, Cure]]] = {cause: [] for cause in CAUSES}
        for rule in REGISTRY:
            for declared in rule.cures:
                table[declared.cause].append((not declared.first, Cure(**dataclasses.asdict(declared), code=rule.code)))
        _CURES = {cause: tuple(c for _, c in sorted(found, key=lambda item: item[0])) for cause, found in table.items()}
    return _CURES


_CURES: Optional[Dict[str, Tuple[Cure, ...]]] = None

#: cause -> what to do when no rule (or not only a rule) cures it; ``{src}`` is
#: the guarded source(s).  TENSOR_SHAPE's ``maybe_mark_dynamic`` advice is built
#: from the dims seen to vary (:func:`cure_label`); BOUNDED causes say so.
REMEDIES: Dict[str, str] = {
    GLOBAL: "pass {src} as an argument (an int: FR011's fix, unsafe), or keep it in a tensor updated with .fill_()",
    MODULE_FLOAT_ATTR: (
        "report: keep {src} in a tensor (buffer) and .fill_() it where it only enters arithmetic; "
        "where it picks something (a dict key, a branch), do that lookup outside the compiled code"
    ),
    PARAMETER_SHAPE: (
        "report: {src} is an nn.Parameter, whose shapes stay static under automatic dynamic: "
        "set torch._dynamo.config.force_parameter_static_shapes = False before compiling, or pass a plain tensor "
        "(its .detach(), where no gradient must flow)"
    ),
    LENGTH: (
        "report: {src} has a new length every call: a list the compiled code appends to (an attribute) "
        "is kept outside it (rule FR013); a list passed in is stacked or padded to one length; a dict that "
        "code outside gives new keys between calls (a config updated per request): read the values the "
        "compiled code needs from it once, outside, into attributes or arguments (LightX2V 6fb7c136)"
    ),
    CLOSURE: "report: pass {src} as an argument (rule FR008 for a closure compiled in a loop)",
    RESUME_VALUE: "report: keep the value a tensor (or capture_scalar_outputs=True for .item())",
    BACKEND: "report: reuse one backend object (rule FR008)",
    CONSTANT: (
        "report: every new value of {src} (a str, a bool, a value compared by equality) is a new graph: "
        "do what depends on it outside the compiled code (tokenize text first, look a key up before the call) "
        "and compile only the tensor part"
    ),
    KEYED_ENTRY: (
        "report: {src} is an entry torch reached by its key's place in the dict, guarded for every key: "
        "look the entry up outside the compiled code and pass it in (a dict looked up by a tensor: rule FR017)"
    ),
    INVALIDATED: (
        "report: {src} is freed between calls, which throws the compiled code away: keep it alive "
        "(a .grad: zero_grad(set_to_none=False)) or pass the tensor in as an argument"
    ),
}

#: ``….scaling['default']``: a float entry of a dict attribute
DICT_ENTRY = re.compile(r"\.(?P<attr>[A-Za-z_]\w*)\[(?P<key>[^\[\]]+)\]$")

#: a module float attribute torch guarded through a value computed from it:
#: it reached an op that needs a Python number (``bernoulli_(1 - p)``), so a
#: tensor cannot stand in.  Measured (tests/trace_scripts/per_block_drop_path.py):
#: 12 blocks compiled one by one, each with its own drop-path rate, 8 graphs
#: and the limit; the model compiled whole, 1 graph.
SPECIALISED_MODULE_FLOAT = (
    "report: {src} reaches an op that needs a Python number (torch guards a value computed from it; "
    "a tensor cannot stand in): if modules compiled one by one each hold their own value (per-block "
    "drop-path rates), compile the model whole or raise torch._dynamo.config.recompile_limit to their number; "
    "if it changes between calls, use it outside the compiled code"
)


@dataclass(frozen=True)
class Reason:
    """One recompile reason, classified."""

    cause: str
    #: the guarded source as the user wrote it (``temperature``, ``self.calls``,
    #: ``x``, ``SCALE``), "" when unknown
    source: str
    #: the reason's guard text without the compile-id prefix and code comment
    text: str
    #: the user-code line the guard points at (from the reason), 0 when unknown
    line: int = 0
    file: str = ""
    #: tensor shape: the dimensions the guard names (``size mismatch at index
    #: 1``, ``x.size()[0]``)
    dims: Tuple[int, ...] = ()
    #: the guard was installed because Python control flow needed a symbolic
    #: value (``# for _ in range(n): ... (…/tensor.py:… in evaluate_expr)``)
    #: or an op needed a Python number (``(…/utils.py:… in run_node)``): the
    #: value is specialised even under automatic dynamic shapes
    specialized: bool = False
    #: where an op needed the Python number: the user's code line and its
    #: place (```torch.as_tensor(crop_box)` (sam.py:22)``), "" otherwise
    op_site: str = ""
    #: torch's comment says duck sizing added this equality (two inputs'
    #: sizes were equal when it compiled, so they share one symbol)
    duck: bool = False
    #: the failure of a cache entry that survived a compile whose other
    #: entries a freed object invalidated (the recompile_reason names the
    #: first entry only): the invalidation is that compile's cause
    stale: bool = False


_INDEX = re.compile(r"\[(\d+)\]")


def shown_sources(sources: Sequence[str]) -> str:
    """``sources`` in backticks, joined; sources that differ only by the
    numbers they are indexed with (an entry per key, a block per layer:
    ``self.state[list(dict.keys(self.state))[3]]['step']``) shown once, the
    first, with how many more and the numbers seen.  Each shown source is
    whole."""
    groups: Dict[str, List[str]] = {}
    for source in sources:
        groups.setdefault(_INDEX.sub("[#]", source), []).append(source)
    parts = []
    for members in groups.values():
        if len(members) <= 2:
            parts.extend(f"`{m}`" for m in members)
            continue
        indexes = [_INDEX.findall(m) for m in members]
        varying = [i for i in range(len(indexes[0])) if len({ix[i] for ix in indexes}) > 1]
        numbers = sorted({int(ix[i]) for ix in indexes for i in varying})
        parts.append(f"`{members[0]}` and {len(members) - 1} more like it (indexes {_runs(numbers)})")
    return ", ".join(parts)


def _runs(numbers: Sequence[int]) -> str:
    """``0-7, 9`` for 0, 1, ..., 7, 9."""
    out: List[str] = []
    start = prev = None
    for n in [*numbers, None]:
        if start is not None and n == prev + 1:  # type: ignore[operator]
            prev = n
            continue
        if start is not None:
            out.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = n
    return ", ".join(out)


@dataclass
class CodeEntry:
    """One compiled code object (one ``frame_id`` of one process)."""

    name: str
    filename: str
    firstlineno: int
    graphs: int = 0
    compiles: int = 0
    limit_hit: bool = False
    reasons: List[Reason] = field(default_factory=list)
    #: innermost frame of the compile stack outside torch/site-packages:
    #: (filename, line, function) -- where user code reached this code object
    user_frame: Optional[Tuple[str, int, str]] = None

    #: compile attempts after the first (each carries a recompile reason; the
    #: attempt that hit the limit counts too)
    recompiles: int = 0
    #: a library function compiled in user code (``torch.compile(F.softmax)``,
    #: ``torch.compile(flex_attention, dynamic=False)``): torch's code object,
    #: often its ``wrap_inline`` wrapper ``inner``, with no user frame in the
    #: trace; (file, line) of the one user compile call of a library function
    #: that can have compiled it (set by :func:`codemods.trace.match.map_library_entries`)
    library_site: Optional[Tuple[str, int]] = None
    #: per graph compiled, in order: the sizes of its tensors as the
    #: ``dynamo_output_graph`` record gives them (node name -> sizes, an int
    #: for a static size, a string for a symbolic one; the graph's inputs are
    #: named after their sources: ``l_x_`` for ``L['x']``)
    graph_sizes: List[Dict[str, List[object]]] = field(default_factory=list)
    #: the distributed ranks whose processes compiled this code object (the
    #: records' ``rank``, or the file's ``rank_N``); empty for one process
    ranks: Tuple[int, ...] = ()
    #: (filename, line, function) of the user frame each compile's stack
    #: shows calling this code object (:func:`_caller_frame`), first seen first
    callers: List[Tuple[str, int, str]] = field(default_factory=list)
    #: (filename, line, function) of the user frames each compile's stack
    #: shows calling this code object as a module (:func:`_module_caller_frame`)
    module_callers: List[Tuple[str, int, str]] = field(default_factory=list)
    #: how torch reached the user's function named here when it compiled a
    #: wrapper of it (``torch.vmap``: torch's ``wrapped``, mapped to the
    #: vmapped ``def`` by :func:`codemods.trace.match.map_library_entries`)
    through: str = ""
    #: graph breaks a dynamo setting lifts (:data:`CAPTURE_BREAKS`), from the
    #: compilations' ``restart_reasons``: the setting -> for each compile of
    #: this code object that broke so, what broke it (``Tensor.item()``,
    #: ``aten.nonzero``)
    capture_breaks: Dict[str, List[str]] = field(default_factory=dict)
    #: (compile number of this code object, the user's source) of each int
    #: argument a compile made symbolic, from the ``create_symbol`` records
    #: (not a tensor's sizes; :func:`_int_symbol`)
    int_symbols: List[Tuple[int, str]] = field(default_factory=list)
    #: a frame resumed after a graph break: the breaks a setting lifts that
    #: its function's compiles recorded (:func:`_link_resumed`)
    resumed_after: Dict[str, List[str]] = field(default_factory=dict)
    #: (file, first line, name) of torch's code object this entry stood for
    #: before it was mapped to the user's function (``through`` says how)
    wrapper: Optional[Tuple[str, int, str]] = None
    #: a symbolic size a compile fixed to one value where user code tied it
    #: to a static one (``symbolic_shape_specialization`` records, reason
    #: ``range_refined_to_singleton``): (compile number, the user's source of
    #: the tensor, dim, value, where (``file.py:line``), the line's text)
    specialized: List[Tuple[int, str, int, str, str, str]] = field(default_factory=list)
    #: compile number -> the sizes of the parameters its graph read
    #: (``l_self_parameters_weight_`` -> ``weight``: its attribute name)
    parameter_sizes: Dict[int, Dict[str, List[object]]] = field(default_factory=dict)

    def shown_sources(self, cause: str) -> str:
        """The sources of ``cause`` for a person to read, each in backticks
        (:func:`shown_sources`)."""
        return shown_sources(self.sources(cause))

    def sources(self, cause: str) -> List[str]:
        """The distinct sources guarded for ``cause``, in the trace's order."""
        out: List[str] = []
        for r in self.reasons:
            if r.cause == cause and r.source and r.source not in out:
                out.append(r.source)
        return out

    @property
    def causes(self) -> List[str]:
        """Distinct causes, the one whose guards saw the most different
        values first (distinct failure texts: ``beta2 == 0.42``, ``beta2 ==
        0.58``, ...), then the most frequent (stale reasons not counted:
        :attr:`Reason.stale`), then table order; an unclassified reason
        (OTHER) after every classified one: a known cause says more.  A rank
        that alternates fails in every compile a new float causes (the
        entries of the other rank fail on it) but shows two values only."""
        counts: Dict[str, int] = {}
        texts: Dict[str, Set[str]] = {}
        for r in self.reasons:
            counts[r.cause] = counts.get(r.cause, 0) + (0 if r.stale else 1)
            if not r.stale:
                texts.setdefault(r.cause, set()).add(r.text)
        return sorted(counts, key=lambda c: (c == OTHER, -len(texts.get(c, ())), -counts[c], CAUSES.index(c)))

    def count(self, cause: str) -> int:
        """Recompiles this cause explains (stale reasons left out)."""
        return sum(1 for r in self.reasons if r.cause == cause and not r.stale)

    @property
    def key(self) -> Tuple[str, int, str]:
        return (self.filename, self.firstlineno, self.name)


@dataclass
class Trace:
    entries: List[CodeEntry] = field(default_factory=list)
    #: files read, and lines that were not JSON records
    files: List[str] = field(default_factory=list)
    bad_lines: int = 0
    #: the largest recompile limit a compile ran under (``dynamo_config`` of
    #: its compilation_metrics), None when the trace does not say
    recompile_limit: Optional[int] = None
    #: compiles that raised at the limit (``fullgraph=True``: torch 2.7+'s
    #: ``FailOnRecompileLimitHit``): the program stopped there, on the storm
    hard_limit_failures: int = 0

    @property
    def total_graphs(self) -> int:
        return sum(e.graphs for e in self.entries)

    def graphs_by_key(self) -> Dict[Tuple[str, int, str], int]:
        out: Dict[Tuple[str, int, str], int] = {}
        for e in self.entries:
            out[e.key] = out.get(e.key, 0) + e.graphs
        return out


# -- reading records --------------------------------------------------------


def iter_records(path: str, failures: Optional[Dict[Tuple[int, object], List[str]]] = None) -> Iterator[Optional[dict]]:
    """The JSON records of one trace file (None for a line that is not one).
    Payload lines are skipped; with ``failures``, the payload of each
    ``recompile_reasons`` artifact -- the failure of every cache entry of the
    frame at that compile, where a compile's ``recompile_reason`` names one --
    is noted there, keyed by the artifact's (frame, compile)."""
    artifact: Optional[Tuple[int, object]] = None
    payload: List[str] = []

    def note() -> None:
        if artifact is not None and failures is not None and payload:
            try:
                listed = json.loads("".join(payload))
            except ValueError:
                return
            if isinstance(listed, list):
                failures.setdefault(artifact, []).extend(str(x) for x in listed)

    with open(path, "r", encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if line.startswith("\t") or not line.strip():
                if artifact is not None:  # payload lines
                    payload.append(line[1:] if line.startswith("\t") else line)
                continue
            note()
            artifact, payload = None, []
            start = line.find("] {")
            start = start + 2 if start >= 0 else line.find("{")
            if start < 0:
                yield None
                continue
            try:
                record = json.loads(line[start:])
            except ValueError:
                yield None
                continue
            if not isinstance(record, dict):
                yield None
                continue
            if (record.get("artifact") or {}).get("name") == "recompile_reasons" and isinstance(record.get("frame_id"), int):
                artifact = (record["frame_id"], record.get("frame_compile_id"))
            yield record
        note()


_INVALIDATED = re.compile(r"Cache line invalidated because (?P<src>.+?) got deallocated")


def trace_files(folder: str) -> List[str]:
    """Trace files in ``folder`` (sorted: stable output)."""
    if os.path.isfile(folder):
        return [folder]
    out = []
    for root, _dirs, names in os.walk(folder):
        for name in names:
            if name.endswith((".log", ".json")) or name.startswith(
                "dedicated_log_torch_trace"
            ):
                out.append(os.path.join(root, name))
    return sorted(out)


_LIMIT_RE = re.compile(r"(recompile|cache[ _]size)[ _]?limit|limit type", re.IGNORECASE)


def _is_limit_failure(metrics: dict) -> bool:
    """The attempt failed on the recompile limit: ``Unsupported`` naming the
    limit (falls back to eager), or under ``fullgraph=True`` torch 2.7+'s
    ``FailOnRecompileLimitHit`` ("Hard failure due to fullgraph=True", raised
    after logging "hit config.recompile_limit (8)")."""
    fail_type = str(metrics.get("fail_type") or "")
    if "RecompileLimitHit" in fail_type or "CacheLimitHit" in fail_type:
        return True
    text = f"{fail_type} {metrics.get('fail_reason') or ''}"
    return (
        bool(fail_type)
        and bool(_LIMIT_RE.search(text))
        and "exceed" in text.lower()
    )


_LIMIT_CONFIG = re.compile(r'"(?:recompile_limit|cache_size_limit)":\s*(\d+)')


def _recompile_limit(config) -> Optional[int]:
    """The recompile limit a compile's ``dynamo_config`` (a JSON string, or
    the dict a trimmed fixture keeps) records: ``recompile_limit``, or its
    old name ``cache_size_limit``."""
    if isinstance(config, dict):
        value = config.get("recompile_limit", config.get("cache_size_limit"))
        return value if isinstance(value, int) else None
    if not isinstance(config, str):
        return None
    found = [int(m.group(1)) for m in _LIMIT_CONFIG.finditer(config)]
    return max(found) if found else None


def limit_notice(trace: "Trace") -> Optional[str]:
    """A line for a run whose recompile limit was raised: a storm then
    compiles on instead of falling back to eager, and the table's "limit hit"
    stays "no"."""
    limit = trace.recompile_limit
    if limit is None or limit <= DEFAULT_RECOMPILE_LIMIT:
        return None
    return (
        f"The recompile limit in this run was {limit:,} (torch's default is {DEFAULT_RECOMPILE_LIMIT}): "
        "a recompile storm compiles on instead of falling back to eager. Something the program ran raised it "
        "(torch._dynamo.config.recompile_limit or cache_size_limit; a library can do it at import: "
        "timm.optim sets 1,000,000)."
    )


def is_library_file(filename: str) -> bool:
    """Is ``filename`` not the user's: installed code (torch, a library) or
    generated (``<eval_with_key>``)?"""
    norm = filename.replace("\\", "/")
    return (
        "/site-packages/" in norm
        or "/dist-packages/" in norm
        or "/lib/python" in norm
        or norm.startswith("<")
    )


def read_trace(folder: str) -> Trace:
    """Parse every trace file under ``folder`` (one per process: the ranks
    of a distributed run, the runs of a job), and merge the processes' copies
    of each code object (:func:`_merge_processes`)."""
    trace = Trace()
    per_file: List[List[CodeEntry]] = []
    for path in trace_files(folder):
        trace.files.append(path)
        per_file.append(_read_file(path, trace))
    trace.entries = _merge_processes(per_file)
    _link_resumed(trace.entries)
    return trace


def _link_resumed(entries: List[CodeEntry]) -> None:
    """Give each frame resumed after a graph break (``torch_dynamo_resume_in_f_at_13``)
    the breaks a setting lifts that compiles of its function (``f`` or a
    frame resumed in it, same file) recorded: what it got came through them."""
    by_function: Dict[Tuple[str, str], Dict[str, List[str]]] = {}
    for e in entries:
        function = resumed_function(e.name) or e.name
        merged = by_function.setdefault((e.filename, function), {})
        for flag, what in e.capture_breaks.items():
            merged.setdefault(flag, []).extend(what)
    for e in entries:
        function = resumed_function(e.name)
        if function is not None:
            e.resumed_after = by_function.get((e.filename, function), {})


#: the name dynamo gives a frame resumed after a graph break in ``fn`` at ``line``
_RESUME_NAME = re.compile(r"^torch_dynamo_resume_in_(?P<fn>.+)_at_(?P<line>\d+)$")


def resumed_at(name: str) -> Optional[Tuple[str, int]]:
    """``torch_dynamo_resume_in_refine_at_13`` -> (``refine``, 13): the
    function a frame resumed after a graph break is of, and the line of the
    break; None for a function's own frame."""
    m = _RESUME_NAME.match(name)
    return (m.group("fn"), int(m.group("line"))) if m else None


def resumed_function(name: str) -> Optional[str]:
    """``torch_dynamo_resume_in_refine_at_13`` -> ``refine``; None for a function's own frame."""
    at = resumed_at(name)
    return at[0] if at else None


_RANK_FILE = re.compile(r"rank_(?P<rank>\d+)")


def _merge_processes(per_file: List[List[CodeEntry]]) -> List[CodeEntry]:
    """One entry per code object (file, first line, name) for all processes:
    the ranks of a distributed run compile the same code, and a table row per
    rank said the same thing twice, matched only once.  The merged entry is the
    process that compiled the most graphs (its counts, sizes and reasons:
    what one process paid, which is what the recompile limit counts), with the
    other processes' reasons it lacks, the limit hit if any process hit it,
    and every rank.  Entries of one file are never merged with each other."""
    merged: List[CodeEntry] = []
    by_key: Dict[Tuple[str, int, str], List[Tuple[CodeEntry, Set[int]]]] = {}
    for index, entries in enumerate(per_file):
        for entry in entries:
            key = (entry.filename, entry.firstlineno, entry.name)
            slot = next((pair for pair in by_key.get(key, []) if index not in pair[1]), None)
            if slot is None:
                by_key.setdefault(key, []).append((entry, {index}))
                merged.append(entry)
                continue
            kept, files = slot
            files.add(index)
            lead, other = (entry, kept) if entry.graphs > kept.graphs else (kept, entry)
            if lead is not kept:
                # the copy that compiled more leads: put it where the first one was
                merged[merged.index(kept)] = lead
                by_key[key][by_key[key].index(slot)] = (lead, files)
            seen = {(r.cause, r.text) for r in lead.reasons}
            lead.reasons.extend(r for r in other.reasons if (r.cause, r.text) not in seen)
            lead.limit_hit = lead.limit_hit or other.limit_hit
            lead.ranks = tuple(sorted(set(lead.ranks) | set(other.ranks)))
            if lead.user_frame is None:
                lead.user_frame = other.user_frame
            lead.callers.extend(c for c in other.callers if c not in lead.callers)
            lead.module_callers.extend(c for c in other.module_callers if c not in lead.module_callers)
    return merged


def rank_label(ranks: Sequence[int]) -> str:
    """``0-3``, ``0,2,5-7``."""
    out: List[str] = []
    values = sorted(set(ranks))
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        out.append(str(values[i]) if i == j else f"{values[i]}-{values[j]}")
        i = j + 1
    return ",".join(out)


def _read_file(path: str, trace: Trace) -> List[CodeEntry]:
    strings: Dict[int, str] = {}
    entries: Dict[int, CodeEntry] = {}
    order: List[int] = []
    pending: Dict[
        int, dict
    ] = {}  # frame_id -> info seen before the code object is known
    #: (frame, compile) whose recompile_reason names a cache invalidation
    told: Set[Tuple[int, object]] = set()
    #: (frame, compile id) -> the failure of every cache entry at that compile
    failures: Dict[Tuple[int, object], List[str]] = {}
    #: (frame, compile id) -> the reasons its recompile_reason gave
    by_compile: Dict[Tuple[int, object], List[Reason]] = {}
    named = _RANK_FILE.search(os.path.basename(path))
    rank: Optional[int] = int(named.group("rank")) if named else None
    for record in iter_records(path, failures):
        if record is None:
            trace.bad_lines += 1
            continue
        if isinstance(record.get("rank"), int):
            rank = record["rank"]
        frame = record.get("frame_id")
        if "str" in record:
            value = record["str"]
            if (
                isinstance(value, list)
                and len(value) == 2
                and isinstance(value[1], int)
            ):
                strings[value[1]] = str(value[0])
            continue
        if not isinstance(frame, int):
            continue
        info = pending.setdefault(frame, {"graphs": 0, "stack": None, "sizes": [], "symbols": [], "specialized": [], "parameters": {}})
        if "dynamo_start" in record:
            stack = (record["dynamo_start"] or {}).get("stack") or []
            frames = []
            for fr in stack:
                if not isinstance(fr, dict):
                    continue
                fname = fr.get("filename")
                fname = (
                    strings.get(fname, str(fname))
                    if isinstance(fname, int)
                    else str(fname or "")
                )
                frames.append(
                    (fname, int(fr.get("line") or 0), str(fr.get("name") or ""))
                )
            info["stack"] = frames
        elif "dynamo_output_graph" in record:
            info["graphs"] += 1
            graph = record["dynamo_output_graph"]
            sizes = graph.get("sizes") if isinstance(graph, dict) else None
            sizes = sizes if isinstance(sizes, dict) else {}
            info["sizes"].append(sizes)
            params = _parameter_sizes(sizes)
            if params and isinstance(record.get("frame_compile_id"), int):
                info["parameters"][record["frame_compile_id"]] = params
            if frame in entries:
                entries[frame].graphs += 1
                entries[frame].graph_sizes.append(sizes)
                entries[frame].parameter_sizes = dict(info["parameters"])
        elif "symbolic_shape_specialization" in record:
            fixed = _specialization(record["symbolic_shape_specialization"], record.get("frame_compile_id"), strings)
            if fixed is not None:
                info["specialized"].append(fixed)
                if frame in entries:
                    entries[frame].specialized.append(fixed)
        elif "create_symbol" in record:
            made = _int_symbol(record["create_symbol"], record.get("frame_compile_id"))
            if made is not None:
                info["symbols"].append(made)
                if frame in entries:
                    entries[frame].int_symbols.append(made)
        elif "compilation_metrics" in record:
            metrics = record["compilation_metrics"] or {}
            limit = _recompile_limit(metrics.get("dynamo_config"))
            if limit is not None and (trace.recompile_limit is None or limit > trace.recompile_limit):
                trace.recompile_limit = limit
            entry = entries.get(frame)
            if entry is None and metrics.get("co_name"):
                entry = CodeEntry(
                    name=str(metrics["co_name"]),
                    filename=str(metrics.get("co_filename") or ""),
                    firstlineno=int(metrics.get("co_firstlineno") or 0),
                    graphs=info["graphs"],
                    graph_sizes=list(info["sizes"]),
                    int_symbols=list(info["symbols"]),
                    specialized=list(info["specialized"]),
                    parameter_sizes=dict(info["parameters"]),
                )
                entries[frame] = entry
                order.append(frame)
            if entry is None:
                # a failure before any successful compile of this frame: name it from the stack
                stack = info.get("stack") or []
                if not stack:
                    continue
                fname, line, name = stack[-1]
                entry = CodeEntry(
                    name=name, filename=fname, firstlineno=line, graphs=info["graphs"], graph_sizes=list(info["sizes"]),
                    int_symbols=list(info["symbols"]), specialized=list(info["specialized"]),
                    parameter_sizes=dict(info["parameters"]),
                )
                entries[frame] = entry
                order.append(frame)
            if entry.user_frame is None and info.get("stack"):
                entry.user_frame = _user_frame(info["stack"])
            caller = _caller_frame(info.get("stack") or [])
            if caller is not None and caller not in entry.callers:
                entry.callers.append(caller)
            caller = _module_caller_frame(info.get("stack") or [])
            if caller is not None and caller not in entry.module_callers:
                entry.module_callers.append(caller)
            restarts = metrics.get("restart_reasons") or []
            for flag, what in capture_breaks(restarts if isinstance(restarts, list) else []):
                entry.capture_breaks.setdefault(flag, []).append(what)
            if _is_limit_failure(metrics):
                entry.limit_hit = True
                if str(metrics.get("fail_type") or "").startswith("FailOn"):
                    trace.hard_limit_failures += 1
            elif not metrics.get("fail_type"):
                entry.compiles += 1
            reason = metrics.get("recompile_reason")
            if reason:
                entry.recompiles += 1
                parsed = parse_reason(str(reason))
                if any(r.cause == INVALIDATED for r in parsed):
                    told.add((frame, record.get("frame_compile_id")))
                parsed = _as_seen_by(entry, parsed)
                entry.reasons.extend(parsed)
                by_compile[(frame, record.get("frame_compile_id"))] = parsed
    # the recompile_reason of a compile names one cache entry's failure; the
    # recompile_reasons artifact lists every entry's.  Each (cause, source)
    # they show counts once per compile: a cache that is a product of axes
    # (rank x a bool attribute x a size) shows every axis, not one.  Entries
    # dropped because a guarded object was freed give that compile its cause,
    # and the other entries' failures are stale.
    for (frame, compile_id), listed in failures.items():
        entry = entries.get(frame)
        if entry is None:
            continue
        key = (frame, compile_id)
        source = next((m.group("src") for m in map(_INVALIDATED.search, listed) if m), None)
        known = by_compile.get(key, [])
        if source is not None and key not in told:
            entry.reasons.append(Reason(INVALIDATED, _user_source(source)[0], f"Cache line invalidated because {source} got deallocated"))
            stale = {id(r) for r in known}
            entry.reasons = [dataclasses.replace(r, stale=True) if id(r) in stale else r for r in entry.reasons]
            continue
        if source is not None:
            continue  # the recompile_reason itself named the invalidation
        seen = {(r.cause, r.source) for r in known}
        for text in listed:
            for r in _as_seen_by(entry, parse_reason(text)):
                if r.cause != INVALIDATED and (r.cause, r.source) not in seen:
                    seen.add((r.cause, r.source))
                    entry.reasons.append(r)
    if rank is not None:
        for entry in entries.values():
            entry.ranks = (rank,)
    return [entries[f] for f in order]


def _as_seen_by(entry: CodeEntry, parsed: List[Reason]) -> List[Reason]:
    """The code after a graph break (a resume function) gets its numbers from
    the code before it: a value guarded there is a value after a graph break."""
    if not entry.name.startswith(RESUME_PREFIX):
        return parsed
    return [dataclasses.replace(r, cause=RESUME_VALUE) if r.cause in (FLOAT_ARG, INT_ARG) else r for r in parsed]


def _caller_frame(stack: Sequence[Tuple[str, int, str]]) -> Optional[Tuple[str, int, str]]:
    """The user frame the stack shows calling the compiled code object (its
    last frame): the one before it, outside torch.  On 2.13 torch's stack
    leaves out the frame that made the call itself (``log_dynamo_start``
    skips one frame too many: measured, ``h -> g -> f`` shows ``h``), so this
    is the caller's caller, or the caller on a release that keeps it."""
    if len(stack) < 2 or is_library_file(stack[-2][0]):
        return None
    return stack[-2]


#: torch's frames between a call of a module and the module's forward, and
#: between a call of a compiled callable and the code it runs (its
#: ``compile_wrapper``: transformers' ``torch.compile(self.__call__)``, called
#: as ``model_forward(**model_inputs)``)
_MODULE_CALL = ("torch/nn/modules/module.py", "torch/_dynamo/eval_frame.py")


def _module_caller_frame(stack: Sequence[Tuple[str, int, str]]) -> Optional[Tuple[str, int, str]]:
    """The user frame that called the compiled code object as a module
    (``transformer(hidden_states=..., timestep=...)``, its forward compiled),
    or a compiled callable that runs it (``model_forward(**model_inputs)``):
    the stack shows only torch's module call (``_wrapped_call_impl``,
    ``_call_impl``) or the compiled callable's wrapper between that frame
    and the code object, so the call at that frame's line is that call
    itself (measured on 2.13; the frame left out is torch's own).  None for
    any other stack."""
    if len(stack) < 3:
        return None
    i = len(stack) - 2
    while i >= 0 and stack[i][0].replace("\\", "/").endswith(_MODULE_CALL):
        i -= 1
    if i < 0 or i == len(stack) - 2 or is_library_file(stack[i][0]):
        return None
    return stack[i]


def _user_frame(
    stack: Sequence[Tuple[str, int, str]],
) -> Optional[Tuple[str, int, str]]:
    for fname, line, name in reversed(stack):
        if not is_library_file(fname):
            return (fname, line, name)
    return None


# -- classifying reasons -----------------------------------------------------
#
# The guard texts of torch 2.13 (torch/_dynamo/guards.py, and the C++ guards'
# failure messages), each with its cause:
#
#   <src> == <float|int>                 float / int argument (also through
#                                        ``kwargs['k']`` / ``args[i]``), module
#                                        attribute (``self.n``, ``L['self'].n``,
#                                        ``self._modules['m'].n``), global
#                                        (``G['X']``), optimizer lr
#                                        (``…['lr']``), train/eval
#                                        (``….training == True``), constants
#                                        (bool, str, None, ...)
#   ___stack0 == 2.0 in torch_dynamo_resume_in_*   value after a graph break
#   <cell>.__closure__[i].cell_contents == v (HINT: guard on "v")  closure
#   tensor 'x' size|stride|rank|dtype|device|requires_grad|dispatch key set mismatch ...
#   2 <= x.size()[0], x.size()[1] == y.size()[1], ...  symbolic shape guards
#   len(xs) == 3, len(d) != 2, ___tuple_iterator_len(it) == 3   length
#   ___check_obj_id(x, id), type=…       identity
#   ___check_type_id(x, id), type=…      type
#   x is None, x is not None             None check
#   hasattr(x, 'a'), ___dict_contains('k', d)   key or attribute presence
#   a is b, Duplicate tensors found: …   aliasing
#   GLOBAL_STATE changed: grad_mode|autocast(cpu)_enabled|…   grad mode /
#                                        autocast / global state
#   ___check_torch_function_mode_stack(), compare_functorch_state(…),
#   torch.autograd.forward_ad._current_level == n   global state
#   BACKEND_MATCH failure: …             backend changed
#   Cache line invalidated because … got deallocated   cache invalidated
#
# Anything else stays "other", shown raw.

RESUME_PREFIX = "torch_dynamo_resume_in_"
#: graph breaks a dynamo setting lifts: how the break starts among a
#: compile's ``restart_reasons`` -> the setting (``torch._dynamo.config.<it>``)
CAPTURE_SCALARS = "capture_scalar_outputs"
CAPTURE_DYNAMIC_SHAPES = "capture_dynamic_output_shape_ops"
CAPTURE_BREAKS: Tuple[Tuple[str, str], ...] = (
    ("Unsupported Tensor.item() call with capture_scalar_outputs=False", CAPTURE_SCALARS),
    # "Dynamic shape operator\n  Explanation: Operator `aten.nonzero.default`'s output shape depends on input Tensor data. ..."
    ("Dynamic shape operator", CAPTURE_DYNAMIC_SHAPES),
)
_SHAPE_OPERATOR = re.compile(r"Operator `(?P<op>[\w.]+?)(?:\.default)?`")


def capture_breaks(restarts: Sequence[object]) -> List[Tuple[str, str]]:
    """(setting, what broke) for each of a compile's ``restart_reasons``
    that a setting lifts, once per setting: ``Tensor.item()`` for
    ``capture_scalar_outputs``, the operator (``aten.nonzero``) for
    ``capture_dynamic_output_shape_ops``."""
    found: Dict[str, str] = {}
    for reason in restarts:
        text = str(reason)
        for start, flag in CAPTURE_BREAKS:
            if text.startswith(start) and flag not in found:
                op = _SHAPE_OPERATOR.search(text)
                found[flag] = op.group("op") if op else ("Tensor.item()" if flag == CAPTURE_SCALARS else "an op")
    return list(found.items())

_COMPILE_ID = re.compile(r"^\s*\[?\d+/\d+\]?\s*:\s*")
_COMMENT = re.compile(r"\s+#\s")
_HINT = re.compile(r'\(HINT: (?P<hint>.*)\)\s*$')
_CLOSURE_HINT = re.compile(r'guard on "(?P<name>[^"]+)"')
_USER_STACK = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<fn>\S+)')
_TENSOR_MISMATCH = re.compile(
    r"^tensor\s+'(?P<name>.+?)'\s+(?:Tensor\s+)?(?P<what>size|stride|rank|dim|dispatch|dtype|device|requires_grad)\w*(\s+\w+)*?\s+mismatch",
    re.IGNORECASE,
)
_MISMATCH_INDEX = re.compile(r"mismatch at index (?P<dim>\d+)")
_SYM_SIZE = re.compile(
    r"(?P<src>(?:[LG]\[['\"][^'\"]+['\"]\]|[A-Za-z_][\w.]*)(?:\[[^\]]+\]|\.[A-Za-z_]\w*)*?)\.(?P<what>size|stride)\(\)\[(?P<dim>\d+)\]|(?P<src2>[\w.'\"\[\]]+)\.storage_offset\(\)"
)
_EQ = re.compile(r"^(?P<src>.+?)\s*==\s*(?P<val>.+?)\s*$")
_LEN = re.compile(
    r"^(?:len|___tuple_iterator_len|___normalize_range_iter|___normalize_count_iter)\((?P<src>.+)\)\s*(?:==|!=)\s*.+$"
)
_OBJ_ID = re.compile(r"^___check_obj_id\((?P<src>.+?),\s*-?\d+\)")
_TYPE_ID = re.compile(r"^___check_(?:fake_script_)?type_id\((?P<src>.+?),\s*-?\d+\)")
_IS_NONE = re.compile(r"^(?P<src>.+?)\s+is(?:\s+not)?\s+None$")
#: a tensor input that is None at this call (torch 2.13's tensor check of a
#: graph input: ``expected type of 'residual' to be a tensor type, ' but
#: found <class 'NoneType'>``): a None check by another name
_TENSOR_IS_NONE = re.compile(r"^expected type of '(?P<src>[^']+)' to be a tensor type, '? but found <class 'NoneType'>$")
_IS = re.compile(r"^(?P<a>\S+)\s+is\s+(?P<b>\S+)$")
_PRESENCE = re.compile(
    r"^(?:not\s+)?(?:hasattr\((?P<obj>.+?),\s*(?P<attr>'[^']*')\)|___dict_contains\((?P<key>.+?),\s*(?P<d>.+?)\)|set\.__contains__\((?P<set>.+?),)"
)
_CLOSURE = re.compile(r"\.__closure__\[\d+\]\.cell_contents")


def _call_args(text: str, start: int) -> List[str]:
    """The top-level arguments of the call whose ``(`` ends right before
    ``start``: commas inside brackets or quotes do not split (a tuple key,
    ``(torch.int64, 'cpu')``)."""
    args, depth, quote, current = [], 0, "", []
    for ch in text[start:]:
        if quote:
            current.append(ch)
            if ch == quote:
                quote = ""
            continue
        if ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                args.append("".join(current).strip())
                return args
            depth -= 1
        elif ch == "," and depth == 0:
            args.append("".join(current).strip())
            current = []
            continue
        current.append(ch)
    return []
#: the truth of a plain access (``not L['self'].state``, ``L['cache']``)
_TRUTHY = re.compile(r"""^(?:not\s+)?(?P<src>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*|\[(?:\d+|'[^']*'|"[^"]*")\])*)$""")
_LOCAL = re.compile(r"""^L\[['"](?P<name>[^'"]+)['"]\]""")
_GLOBAL = re.compile(r"""^G\[['"](?P<name>[^'"]+)['"]\]""")
_ANY_SCOPE = re.compile(r"""\b[LG]\[['"](?P<name>[^'"]+)['"]\]""")
_MODULE_GLOBAL = re.compile(r"""\bG\[['"]__import_[^'"]+['"]\]\.""")
_MODULE_DICT = re.compile(r"""\._(?:modules|parameters|buffers)\[['"](?P<name>[^'"]+)['"]\]""")
_IDENT = re.compile(r"^[A-Za-z_]\w*$")
#: a value an object passed in holds (``seq_ctx.cu_seq_lens_q``): reached through that object
_HELD = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+$")


def held_source(source: str) -> Optional[Tuple[str, Tuple[str, ...]]]:
    """(the name, its attributes) of a value an object the code was passed
    holds, as a guard names it (``seq_ctx.cu_seq_lens_q`` -> ("seq_ctx",
    ("cu_seq_lens_q",))); None for any other source, and for ``self``'s
    (a module's state, not something the callers pass)."""
    if not _HELD.match(source) or source.startswith("self."):
        return None
    name, *attrs = source.split(".")
    return name, tuple(attrs)
#: ``kwargs['temperature']``, ``args[1]``: an argument reached through a
#: ``**kwargs`` / ``*args`` container (or any subscript of a name)
_KEYED = re.compile(r"""^[A-Za-z_]\w*(\[(\d+|'[^']*'|"[^"]*")\])+$""")
_ATTR = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$")
_INT = re.compile(r"^[+-]?\d+$")
_FLOAT = re.compile(r"^[+-]?(\d+\.\d*|\.\d+|\d+(\.\d*)?[eE][+-]?\d+|inf|nan)$")
_LR = re.compile(r"""\[['"](lr|initial_lr)['"]\]|param_groups""")
_LR_KEY = re.compile(r"""\[['"](lr|initial_lr)['"]\]""")
_COMPARE = re.compile(r"(<=|>=|<|>|==|!=)")
_SYM_INT = re.compile(
    r"""^(?P<a>[A-Za-z_]\w*|[+-]?\d+)\s*(?:<=|>=|<|>|!=)\s*(?P<b>[A-Za-z_]\w*|[+-]?\d+)$"""
)


#: a name with its attributes and constant subscripts, inside an expression
_ACCESS = re.compile(r"""(?<![\w.'"\]])[A-Za-z_]\w*(?:\.[A-Za-z_]\w*|\[(?:\d+|'[^']*'|"[^"]*")\])*""")
#: a call inside a guarded expression (``x.size()[1]``, ``len(xs)``)
_CALL = re.compile(r"[\w\])]\s*\(")


def _computed_from(src: str) -> Optional[str]:
    """The one access a computed guard's value comes from: ``(1.0 +
    ((-1)*self.drop_path.drop_prob))`` -> ``self.drop_path.drop_prob``;
    None for a plain access or an expression over several.  Torch guards a
    value computed from a float when an op needed it as a Python number
    (``bernoulli_(1 - p)``): a value it specialised, not one it made dynamic."""
    if _ACCESS.fullmatch(src) or _CALL.search(src):
        return None  # a plain access (`a[0].b['c']`), or a call (`x.size()[1]`, `len(xs)`): guarded as what it is
    found = {m.group(0) for m in _ACCESS.finditer(src)}
    return found.pop() if len(found) == 1 else None


#: ``___as_tensor(<access>).item()`` (torch 2.9's spelling of a float guard)
_AS_TENSOR_ITEM = re.compile(r"___as_tensor\((?P<inner>[^()]*(?:\([^()]*\)[^()]*)*)\)\.item\(\)")


#: a tensor's size, stride or offset as a symbol's source names it (``L['x'].size()[0]``)
_TENSOR_PROPERTY = re.compile(r"\.(size|stride|storage_offset)\(\)")


#: a graph input that is a parameter of a module (``l_self_parameters_weight_``,
#: ``l_self_modules_norm_parameters_weight_``): its attribute name
_PARAMETER_INPUT = re.compile(r"^l_.*_parameters_(?P<name>[A-Za-z0-9_]+?)_$")
#: a tensor's size as a source: ``L['x'].size()[2]``
_SIZE_SOURCE = re.compile(r"^(?P<tensor>.+)\.size\(\)\[(?P<dim>\d+)\]$")


def _parameter_sizes(sizes: Dict[str, List[object]]) -> Dict[str, List[object]]:
    """The sizes of the graph's parameter inputs, by attribute name."""
    out: Dict[str, List[object]] = {}
    for node, dims in sizes.items():
        m = _PARAMETER_INPUT.match(node)
        if m and isinstance(dims, list):
            out.setdefault(m.group("name"), dims)
    return out


def _specialization(record: object, compile_id: object, strings: Dict[int, str]) -> Optional[Tuple[int, str, int, str, str, str]]:
    """(compile number, the user's source of the tensor, dim, value, where
    (``file.py:line``), the line's text) of a ``symbolic_shape_specialization`` record where
    user code fixed a tensor's symbolic size to one value
    (``{"sources": ["L['x'].size()[2]"], "value": "32", "reason":
    "range_refined_to_singleton", "user_stack": [{"line": 21, "loc":
    "return out * self.weight"}]}``); None for anything else."""
    if not isinstance(record, dict) or not isinstance(compile_id, int) or record.get("reason") != "range_refined_to_singleton":
        return None
    sources = record.get("sources") or []
    stack = record.get("user_stack") or []
    m = _SIZE_SOURCE.match(str(sources[0])) if len(sources) == 1 else None
    if m is None or not stack or not isinstance(stack[-1], dict):
        return None
    user, is_global = _user_source(m.group("tensor"))
    if is_global:
        return None
    last = stack[-1]
    fname = last.get("filename")
    fname = strings.get(fname, str(fname)) if isinstance(fname, int) else str(fname or "")
    where = f"{os.path.basename(fname)}:{int(last.get('line') or 0)}"
    return (compile_id, user, int(m.group("dim")), str(record.get("value")), where, str(last.get("loc") or ""))


def parameter_pins(entry: "CodeEntry") -> List[Tuple[str, int, str, str, str]]:
    """(the tensor's source, dim, parameter, where, the line's text) where
    the entry recompiled on that dim of the tensor and a compile fixed it to
    the size of a parameter the line reads (``out * self.weight``): it
    recompiles for every size of the parameter, since parameters keep static
    sizes; once per (tensor, dim, parameter).  (A dim fixed so that did not
    recompile, a Linear's input features, is no pin.)"""
    recompiled = {(r.source, d) for r in entry.reasons if r.cause == TENSOR_SHAPE for d in r.dims}
    out: List[Tuple[str, int, str, str, str]] = []
    for compile_id, tensor, dim, value, where, loc in entry.specialized:
        if (tensor, dim) not in recompiled:
            continue
        for name, dims in entry.parameter_sizes.get(compile_id, {}).items():
            if value in (str(d) for d in dims) and re.search(rf"\.{re.escape(name)}\b", loc):
                pin = (tensor, dim, name, where, loc)
                if not any(p[:3] == pin[:3] for p in out):
                    out.append(pin)
    return out


def _int_symbol(made: object, compile_id: object) -> Optional[Tuple[int, str]]:
    """(compile number, the user's source) of a ``create_symbol`` record
    that made an int argument symbolic (``{"symbol": "s87", "val": "7",
    "source": "L['seq_ctx'].max_length_q"}``); None for a tensor's size,
    a float, a global or a record without a source."""
    if not isinstance(made, dict) or not isinstance(compile_id, int):
        return None
    source = made.get("source")
    if not isinstance(source, str) or not _INT.match(str(made.get("val", ""))) or _TENSOR_PROPERTY.search(source):
        return None
    user, is_global = _user_source(source)
    return None if is_global else (compile_id, user)


def _user_source(src: str) -> Tuple[str, bool]:
    """``L['x'].attr`` -> ("x.attr", False); ``G['X']`` -> ("X", True);
    ``self._modules['kv_cache'].size`` -> ("self.kv_cache.size", False);
    ``self._modules['layers']._modules['0'].scaling['default']`` ->
    ("self.layers[0].scaling['default']", False)."""
    src = src.strip()
    # torch before 2.12 (2.9.1, 2.10.0, 2.11.0 recorded) spells a float it guards
    # as a Python number through a 0-d tensor: ``___as_tensor(self._modules['drop_path'].drop_prob).item()``
    src = _AS_TENSOR_ITEM.sub(lambda m: m.group("inner"), src)
    is_global = bool(_GLOBAL.match(src))
    # a global read through its module (``G['__import___main__']._TRI_ID``):
    # the name as the module's code spells it
    src = _MODULE_GLOBAL.sub("", src)
    src = _ANY_SCOPE.sub(lambda m: m.group("name"), src)
    # a submodule of a ModuleList or Sequential is named by its index: [0], as written
    src = _MODULE_DICT.sub(lambda m: f"[{m.group('name')}]" if m.group("name").isdigit() else "." + m.group("name"), src)
    return src, is_global


def _shape_guard(guard: str) -> Optional[Tuple[str, Tuple[int, ...]]]:
    """A symbolic shape guard (``2 <= x.size()[0]``): (tensor, dims)."""
    if not _COMPARE.search(guard):
        return None
    found = list(_SYM_SIZE.finditer(guard))
    if not found:
        return None
    first = found[0]
    name, _ = _user_source(first.group("src") or first.group("src2") or "")
    dims = tuple(
        sorted(
            {
                int(m.group("dim"))
                for m in found
                if m.group("dim") is not None
                and m.group("what") == "size"
                and _user_source(m.group("src"))[0] == name
            }
        )
    )
    return name, dims


#: one comparison of a value with an int constant, either way round
_INT_COMPARE = re.compile(
    r"^(?:(?P<src>[^\s()=!<>]+)\s*(?P<op><=|>=|==|!=|<|>)\s*(?P<val>[+-]?\d+)|(?P<val2>[+-]?\d+)\s*(?P<op2><=|>=|==|!=|<|>)\s*(?P<src2>[^\s()=!<>]+))$"
)
_BOOL_WORDS = re.compile(r"\b(?:not|or|and)\b")


def tested_int(guard: str) -> Optional[Tuple[str, str]]:
    """(source, one of the constants) of a symbolic guard testing one source against int constants, as torch
    writes a test user code made on a dynamic int: ``not (self.layer_idx == 0
    or self.layer_idx == 5)`` (``self.layer_idx in dense_layers``, FastVideo's
    VSA impl before 3792707), ``n != 4``, ``2 <= self.pos and self.pos < 8``;
    None for anything else (a plain ``x == 3`` is a specialised value, read
    by :func:`classify`'s other cases)."""
    text = guard.strip()
    compound = bool(_BOOL_WORDS.search(text))
    atoms = [a.strip() for a in re.split(r"\s+(?:or|and)\s+", re.sub(r"\bnot\b|[()]", " ", text).strip())] if compound else [text]
    sources = set()
    constant = ""
    for atom in atoms:
        m = _INT_COMPARE.match(atom)
        if m is None:
            return None
        if not compound and (m.group("op") or m.group("op2")) == "==":
            return None
        sources.add(m.group("src") or m.group("src2"))
        constant = m.group("val") or m.group("val2")
    if len(sources) != 1:
        return None
    (src,) = sources
    # a plain name compared once is :data:`_SYM_INT`'s
    return None if _INT.match(src) or (_IDENT.match(src) and not compound) else (src, constant)


def classify(guard: str, hint: str = "") -> Tuple[str, str, Tuple[int, ...], bool]:
    """(cause, source, dims, computed) for one failed guard's text (``hint``:
    the ``(HINT: …)`` torch appended, if any); ``computed``: the guard is on a
    value computed from its source (:func:`_computed_from`), one torch
    specialised because an op needed a Python number."""
    guard = guard.strip()
    m = _TENSOR_MISMATCH.match(guard)
    if m:
        name, _ = _user_source(m.group("name"))
        what = m.group("what").lower()
        if what == "size":
            idx = _MISMATCH_INDEX.search(guard)
            cause = PARAMETER_SHAPE if "Guard failed on a parameter" in guard or "Guard failed on a parameter" in hint else TENSOR_SHAPE
            return cause, name, ((int(idx.group("dim")),) if idx else ()), False
        cause = {
            "stride": LAYOUT,
            "rank": RANK,
            "dim": RANK,
            "dispatch": DISPATCH,
            "dtype": DTYPE,
            "device": DEVICE,
            "requires_grad": REQUIRES_GRAD,
        }[what]
        return cause, name, (), False
    if guard.startswith("GLOBAL_STATE changed"):
        if "grad_mode" in guard:
            return GRAD_MODE, "", (), False
        if "autocast" in guard:
            return AUTOCAST, "", (), False
        return GLOBAL_STATE, guard.partition(":")[2].strip(), (), False
    if guard.startswith(("___check_global_state", "___check_torch_function_mode_stack", "torch._functorch.pyfunctorch.compare_functorch_state", "torch.autograd.forward_ad._current_level")):
        return GLOBAL_STATE, "", (), False
    if guard.startswith("BACKEND_MATCH"):
        return BACKEND, "", (), False
    if guard.startswith("Cache line invalidated"):
        return INVALIDATED, "", (), False
    if guard.startswith("Duplicate tensor"):
        return ALIASING, ", ".join(duplicate_tensors(guard)), (), False
    m = _OBJ_ID.match(guard)
    if m:
        return IDENTITY, _user_source(m.group("src"))[0], (), False
    m = _TYPE_ID.match(guard)
    if m:
        return TYPE, _user_source(m.group("src"))[0], (), False
    m = _LEN.match(guard)
    if m:
        return LENGTH, _user_source(m.group("src"))[0], (), False
    m = _IS_NONE.match(guard) or _TENSOR_IS_NONE.match(guard)
    if m:
        return NONE_CHECK, _user_source(m.group("src"))[0], (), False
    m = _PRESENCE.match(guard)
    if m:
        if m.group("obj"):
            src = f"{_user_source(m.group('obj'))[0]}.{m.group('attr').strip(chr(39))}"
        elif m.group("d"):
            args = _call_args(guard, guard.index("___dict_contains(") + len("___dict_contains("))
            key, d = args if len(args) == 2 else (m.group("key"), m.group("d"))
            src = f"{_user_source(d)[0]}[{key}]"
        else:
            src = _user_source(m.group("set"))[0]
        return KEYS, src, (), False
    m = _IS.match(guard)
    if m and "(" not in guard:
        return ALIASING, _user_source(m.group("a"))[0], (), False
    m = _TRUTHY.match(guard)
    if m:  # `not self.state`: an optimizer's state dict was empty on its first step
        src = _user_source(m.group("src"))[0]
        return (TRAIN_EVAL if src.endswith(".training") else TRUTH), src, (), False
    shape = _shape_guard(guard)
    if shape is not None:
        return TENSOR_SHAPE, shape[0], shape[1], False
    tested = tested_int(guard)
    if tested is not None:  # a dynamic int attribute tested against constants: classified by its source
        return _classify_value(tested[0], tested[1], hint)
    if _BOOL_WORDS.search(guard.partition("==")[0]):
        return OTHER, "", (), False  # tests of several values: no one source (not the text up to `==`)
    m = _EQ.match(guard)
    if not m:
        sym = _SYM_INT.match(guard)
        if sym:  # a symbolic guard on a dynamic int: 2 <= n, n < 5
            name = sym.group("a") if _IDENT.match(sym.group("a")) else sym.group("b")
            return INT_ARG, _user_source(name)[0], (), False
        return OTHER, "", (), False
    return _classify_value(m.group("src"), m.group("val").strip(), hint)


def _classify_value(raw_src: str, value: str, hint: str) -> Tuple[str, str, Tuple[int, ...], bool]:
    """:func:`classify` of a guard on the value of ``raw_src`` (compared with
    ``value``, a literal as torch writes it)."""
    src, is_global = _user_source(raw_src)
    if "[list(dict.keys(" in raw_src:  # `self.state[list(dict.keys(self.state))[1]]['step'] == 0`
        return KEYED_ENTRY, src, (), False
    if _CLOSURE.search(raw_src):
        h = _CLOSURE_HINT.search(hint)
        return CLOSURE, (h.group("name") if h else src), (), False
    if _LR.search(raw_src):
        if _INT.match(value.strip()) and not _LR_KEY.search(raw_src):  # a step counter kept in the group (timm's Lamb: group['step'] += 1)
            return INT_ARG, src, (), False
        return OPTIMIZER_LR, src, (), False  # an lr, even an int one (lr=1), and the float hyperparameters
    if is_global:
        return GLOBAL, src, (), False
    if src.startswith("___stack"):
        return RESUME_VALUE, src, (), False
    # int(x) == 3 / float(x) == 0.5: a subclass of int or float
    sub = re.match(r"^(int|float)\((?P<inner>.+)\)$", src)
    if sub:
        src = sub.group("inner")
    is_int, is_float = bool(_INT.match(value)), bool(_FLOAT.match(value))
    computed = _computed_from(src) if (is_int or is_float) else None
    if computed is not None:  # a value computed from one attribute or argument
        src = computed
    if src.endswith(".training") and value in ("True", "False"):
        return TRAIN_EVAL, src, (), computed is not None
    if _ATTR.match(src) and (is_int or is_float):
        if is_int and not src.startswith("self.") and "nn.Module" not in hint:
            # `meta.max_q`: an int field of a plain object passed in (torch
            # hints at nn.Module for a module's): automatic dynamic lifts it
            # as it lifts an int argument (measured: 2 graphs; 8 and the
            # limit with dynamic=False)
            return INT_ARG, src, (), computed is not None
        return (MODULE_INT_ATTR if is_int else MODULE_FLOAT_ATTR), src, (), computed is not None
    if _IDENT.match(src) or _KEYED.match(src):
        if is_float:
            return FLOAT_ARG, src, (), computed is not None
        if is_int:
            return INT_ARG, src, (), computed is not None
    if not (is_int or is_float):
        return CONSTANT, src, (), computed is not None
    # a number reached through attributes and subscripts: self.layers[0].idx
    # is a module's, kwargs['cfg'].lr an argument's
    if src == "self" or src.startswith(("self.", "self[")):
        return (MODULE_INT_ATTR if is_int else MODULE_FLOAT_ATTR), src, (), computed is not None
    return (INT_ARG if is_int else FLOAT_ARG), src, (), computed is not None


def classify_guard(guard: str) -> Tuple[str, str]:
    """(cause, source) for one failed guard's text."""
    cause, source, _dims, _computed = classify(guard)
    return cause, source


def parse_reason(text: str) -> List[Reason]:
    """Every failed guard of one ``recompile_reason``, classified."""
    head, _, stack = text.partition("User stack trace:")
    frames = list(_USER_STACK.finditer(stack))
    file, line = "", 0
    if frames:
        file, line = frames[-1].group("file"), int(frames[-1].group("line"))
    else:
        # torch before 2.11 (2.9.1, 2.10.0 recorded) writes no user stack: the guard's own comment
        # names the line (``# return x * t  # path/to/file.py:6 in f``)
        where = _GUARD_SITE.search(_guard_lines(head)[0] if head.strip() else "")
        if where is not None:
            file, line = where.group("file"), int(where.group("line"))
    out: List[Reason] = []
    for raw in _guard_lines(head):
        raw = raw.strip()
        if not raw:
            continue
        guard_text = _COMPILE_ID.sub("", raw, count=1)
        # torch joins several failed guards (recompiles_verbose) with "; "
        for part in _split_guards(guard_text):
            hint_m = _HINT.search(part)
            guard = _COMMENT.split(part, maxsplit=1)[0].strip()
            if hint_m and guard.endswith(hint_m.group(0).strip()):
                guard = guard[: -len(hint_m.group(0).strip())].strip()
            cause, source, dims, computed = classify(guard, hint_m.group("hint") if hint_m else "")
            text_out = guard if cause != OTHER else part.strip()
            op_site = _op_site(part)
            out.append(
                Reason(
                    cause=cause,
                    source=source,
                    text=text_out,
                    line=line,
                    file=file,
                    dims=dims,
                    specialized=" in evaluate_expr)" in part or bool(op_site) or computed,
                    op_site=op_site,
                    duck=cause == TENSOR_SHAPE and DUCK_SIZING in part,
                )
            )
    return out


#: the ``type=`` of an identity guard: torch 2.10 to 2.12 write the guarded object's
#: repr there (2.10.0, 2.11.0, 2.12.1 recorded; 2.9.1 no type=; 2.13, 2.14: its class), an optimizer's or a module's
#: over several lines (``type=SGD (\nParameter Group 0\n    lr: 0.01\n...\n)  # <code>``)
_TYPE_REPR = re.compile(r", type=(?P<repr>.*)$")


def _guard_lines(head: str) -> List[str]:
    """The lines of a reason's head, one per guard: a ``type=`` repr over
    several lines is folded into its guard's line as ``type=SGD (...)``, with
    the guard's comment from the repr's last line."""
    lines: List[str] = []
    depth = 0
    for raw in head.splitlines():
        if depth > 0:
            depth += raw.count("(") - raw.count(")")
            if depth <= 0:
                lines[-1] += "..." + raw.strip()
            continue
        lines.append(raw)
        m = _TYPE_REPR.search(raw)
        if m is not None and "#" not in m.group("repr"):
            depth = m.group("repr").count("(") - m.group("repr").count(")")
    return lines


#: ``  # <code>  # <file>:<line> in <fn>`` ending the first guard of a reason
_GUARD_SITE = re.compile(r"#\s+.+?\s+#\s+(?P<file>\S+\.py):(?P<line>\d+) in [\w<>.]+")

#: ``  # <code>  # <file>:<line> in <fn> (_dynamo/utils.py:4231 in run_node)``:
#: the comment torch puts on a guard an op installed when it needed a number
_RUN_NODE = re.compile(r"#\s+(?P<code>.+?)\s+#\s+(?P<file>\S+):(?P<line>\d+) in \S+ \([^()]*\bin run_node\)\s*$")


def _op_site(guard: str) -> str:
    """```<code>` (<file>:<line>)`` of a guard an op installed because it needed
    a Python number (the value is specialised, whatever dynamic= says)."""
    m = _RUN_NODE.search(guard)
    if m is None:
        return ""
    return f"`{m.group('code').strip()}` ({os.path.basename(m.group('file'))}:{m.group('line')})"


def _split_guards(text: str) -> List[str]:
    """``a == 1; b == 2`` -> two guards; a ``;`` inside a comment, a HINT or a
    message does not split."""
    if "; " not in text or "#" in text or "HINT" in text or text.startswith(("Duplicate", "BACKEND", "Cache line", "Unexpected", "Unable")):
        return [text]
    return [p for p in text.split("; ") if p.strip()]


# -- the table -----------------------------------------------------------------


_DUPLICATES = re.compile(r"^Duplicate tensors? found:\s*\[?(?P<names>.*?)\]?\s*$")


def duplicate_tensors(guard: str) -> List[str]:
    """The sources of a ``Duplicate tensors found: ["args[1].qacc",
    "args[1].qacc_smooth"]`` guard, as the user writes them (two inputs
    the first compile saw as distinct tensors, one tensor now)."""
    m = _DUPLICATES.match(guard.strip())
    if m is None:
        return []
    return [_user_source(n.strip().strip("'\""))[0] for n in m.group("names").split(",") if n.strip()]


def aliased_pairs(entry: "CodeEntry") -> List[Tuple[str, str]]:
    """Each pair of inputs the trace saw arrive as one tensor (the
    duplicate-tensor guard), in the trace's order."""
    out: List[Tuple[str, str]] = []
    for r in entry.reasons:
        if r.cause == ALIASING and r.text.startswith("Duplicate tensor"):
            names = duplicate_tensors(r.text)
            for a, b in zip(names, names[1:]):
                if (a, b) not in out:
                    out.append((a, b))
    return out


def dict_attributes(entry: "CodeEntry") -> List[str]:
    """The dict attributes whose float entries the trace saw guarded on a
    value (``….scaling['default'] == 1.0``; not specialised: a value an op
    needed as a Python number cannot be a tensor)."""
    out: List[str] = []
    for r in entry.reasons:
        if r.cause != MODULE_FLOAT_ATTR or r.specialized or not r.source:
            continue
        m = DICT_ENTRY.search(r.source)
        if m and m.group("attr") not in out:
            out.append(m.group("attr"))
    return out


def argument_of(source: str) -> Optional[Tuple[str, bool]]:
    """(name, passed by keyword) of the argument a guard's source is: ``x`` ->
    ("x", False), ``kwargs['cu_doc_lens']`` -> ("cu_doc_lens", True); None
    for any other source (``args[1]``, ``self.n``): no name of the user's."""
    keyword = _KWARG.match(source)
    if keyword is not None:
        return keyword.group("key"), True
    return (source, False) if _IDENT.match(source) else None


def named_arguments(entry: "CodeEntry", cause: str) -> List[str]:
    """The arguments passed by position whose guards ``cause`` names (``x``;
    not ``kwargs['x']``, not ``args[0]``), in the trace's order."""
    return [a[0] for a in (argument_of(s) for s in entry.sources(cause)) if a is not None and not a[1]]


#: a state passed in, as a guard names it: ``args[1]``, ``kwargs['d']``, ``d`` (not ``self``)
_STATE_HOLDER = r"""(?!self\.)(?:args\[\d+\]|kwargs\[['"][A-Za-z_]\w*['"]\]|[A-Za-z_]\w*)"""
#: a field of a state object passed in (``args[1].subtree_com``, ``d.qacc``):
#: not ``self``'s (a module's attribute), not a nested path
_STATE_FIELD = re.compile(rf"^{_STATE_HOLDER}\.(?P<field>[A-Za-z_]\w*)$")


#: torch's names of dtypes in a guard (``dtype mismatch. expected Long,
#: actual Int``) -> the ``torch`` attribute
_DTYPE_NAMES = {
    "Long": "int64", "Int": "int32", "Short": "int16", "Char": "int8", "Byte": "uint8", "Bool": "bool",
    "Float": "float32", "Double": "float64", "Half": "float16", "BFloat16": "bfloat16",
}
_DTYPE_CHANGE = re.compile(r"dtype mismatch\. expected (?P<expected>\w+), actual (?P<actual>\w+)")
#: a field of a state passed in, read through nested objects: ``args[1].contact.geom``
_STATE_FIELD_PATH = re.compile(rf"^{_STATE_HOLDER}(?:\.[A-Za-z_]\w*)*\.(?P<field>[A-Za-z_]\w*)$")


def field_dtypes(entry: "CodeEntry") -> List[Tuple[str, str, str]]:
    """(field, expected, actual) of the entry's dtype guards on a field of a
    state passed in (:func:`state_field`, :func:`dtype_change`)."""
    out: List[Tuple[str, str, str]] = []
    for r in entry.reasons:
        name, dtypes = (state_field(r.source), dtype_change(r.text)) if r.cause == DTYPE else (None, None)
        if name is not None and dtypes is not None and (name, *dtypes) not in out:
            out.append((name, *dtypes))
    return out


def dtype_change(text: str) -> Optional[Tuple[str, str]]:
    """(expected, actual) as ``torch`` attributes (``int64``, ``int32``) of a
    dtype guard's text; None when either is not a dtype named here."""
    m = _DTYPE_CHANGE.search(text)
    if m is None or m.group("expected") not in _DTYPE_NAMES or m.group("actual") not in _DTYPE_NAMES:
        return None
    return _DTYPE_NAMES[m.group("expected")], _DTYPE_NAMES[m.group("actual")]


def state_field(source: str) -> Optional[str]:
    """The field a guard's source reads of a state passed in, also through
    nested objects: ``args[1].contact.geom`` -> ``geom``; None otherwise."""
    m = _STATE_FIELD_PATH.match(source)
    return m.group("field") if m else None


def field_of(source: str) -> Optional[str]:
    """The field a guard's source reads of a state object passed in:
    ``args[1].subtree_com`` -> ``subtree_com``; None for anything else."""
    m = _STATE_FIELD.match(source)
    return m.group("field") if m else None


#: causes that automatic dynamic shapes lift after one change (``dynamic=None``)
AUTOMATIC_DYNAMIC = frozenset({FLOAT_ARG, INT_ARG, TENSOR_SHAPE})
#: the source torch names for a loop's iterator: a comprehension's ``.0``, a
#: value on the stack of a frame resumed after a graph break (``___stack1``)
_LOOP_ITERATOR = re.compile(r"^(?:\.\d+|___stack\d+)$")


def loop_iterators(entry: "CodeEntry", cause: str) -> bool:
    """Is every source guarded for ``cause`` a loop's iterator?"""
    sources = entry.sources(cause)
    return bool(sources) and all(_LOOP_ITERATOR.match(s) for s in sources)
#: a keyword argument of a compiled function taking ``**kwargs``
_KWARG = re.compile(r"""^kwargs\[['"](?P<key>[A-Za-z_]\w*)['"]\]$""")

#: how torch 2.13 comments a guard that duck sizing made (``a.size()[1] ==
#: b.size()[0]  # duck sizing added this equality because these variables had
#: the same size 64 (to avoid this specialization, set
#: torch.fx.experimental._config.use_duck_shape = False)``)
DUCK_SIZING = "duck sizing added this equality"


def parameter_sized(entry: "CodeEntry") -> List[str]:
    """The entry's guards on the size of an ``nn.Parameter``, one per text
    (without torch's hint to set ``force_parameter_static_shapes``), and the
    dims its compiles tied to a parameter's size (:func:`parameter_pins`)
    where the entry recompiled on that tensor's shape."""
    out = [f"`{r.text.split('. Guard failed on a parameter')[0]}`" for r in entry.reasons if r.cause == PARAMETER_SHAPE]
    out += [f"dim {dim} of `{tensor}` tied to the size of `{name}` at {where} (`{loc}`)" for tensor, dim, name, where, loc in parameter_pins(entry)]
    return list(dict.fromkeys(out))


def duck_sized(entry: "CodeEntry") -> List[str]:
    """The entry's guards duck sizing added, one per text."""
    return list(dict.fromkeys(r.text for r in entry.reasons if r.duck))


#: the 0/1 specialisation guard: a dynamic dim got size 0 or 1
_ZERO_ONE = re.compile(r"^2 <= \S+\.size\(\)\[\d+\]$")


def is_zero_one(reason: Reason) -> bool:
    return reason.cause == TENSOR_SHAPE and bool(_ZERO_ONE.match(reason.text))


# A symbolic guard that tests a dynamic size against a constant
# (``32 != (hidden_states.size()[3] // 2)``): the dim is dynamic already, and
# user code decided something on its size: a slice bound clamped to the size
# (diffusers' AuraFlow before #11297: ``pe[starth:endh]`` with ``endh`` from the
# input's height, under ``dynamic=True``), a branch on the size.  The next size
# on the other side of the test is another graph; ``maybe_mark_dynamic``
# cannot lift it (measured on 2.13: 2 -> 2 graphs), the code has to compute
# without the test (AuraFlow's fix: indexes from ``arange`` + ``meshgrid``,
# no slice).  Reported, with the line that made the guard.
_SIZE_TEST = re.compile(r"^(?P<a>.+?)\s*(?:<=|>=|==|!=|<|>)\s*(?P<b>.+?)$")


def is_size_test(reason: Reason) -> bool:
    """Is ``reason`` a symbolic guard testing one dynamic size expression
    against an int constant (not the 0/1 specialisation guard)?"""
    if reason.cause != TENSOR_SHAPE or is_zero_one(reason) or "mismatch" in reason.text:
        return False
    m = _SIZE_TEST.match(reason.text)
    if m is None:
        return False
    sides = [m.group("a").strip(), m.group("b").strip()]
    constant = [s for s in sides if _INT.match(s)]
    sized = [s for s in sides if _SYM_SIZE.search(s)]
    return len(constant) == 1 and len(sized) == 1 and len({x.group(0) for x in _SYM_SIZE.finditer(sized[0])}) == 1


def size_tests(entry: "CodeEntry") -> List[Reason]:
    """The entry's reasons that are size tests (:func:`is_size_test`), one per guard text."""
    seen: Dict[str, Reason] = {}
    for r in entry.reasons:
        if is_size_test(r):
            seen.setdefault(r.text, r)
    return list(seen.values())


def int_tests(entry: "CodeEntry", cause: str) -> List[Reason]:
    """The entry's specialised reasons of ``cause`` that test one int against
    constants (:func:`tested_int`), one per guard text."""
    seen: Dict[str, Reason] = {}
    for r in entry.reasons:
        if r.cause == cause and r.specialized and tested_int(r.text):
            seen.setdefault(r.text, r)
    return list(seen.values())


def _at(reason: Reason) -> str:
    """`` at file.py:12`` where the guard was made, or nothing."""
    return f" at {os.path.basename(reason.file)}:{reason.line}" if reason.file and reason.line else ""


def varying_dims(entry: "CodeEntry") -> Dict[str, Tuple[int, ...]]:
    """Tensor -> dimensions the trace saw change size (``size mismatch at
    index i`` and symbolic shape guards; not the 0/1 specialisation guard,
    which ``maybe_mark_dynamic`` does not lift, nor a size tested against a
    constant, :func:`is_size_test`).  Not a tensor whose rank the trace saw
    change: dim 0 of another rank is another axis, and a mark there cured
    nothing (compressed-tensors' ``cast_to_fp4``, called with ranks 1 to 5:
    marked 6 -> 7 graphs).  Nor a dim tied to a parameter's size
    (:func:`parameter_pins`), which stays static whatever the mark says."""
    reranked = set(entry.sources(RANK))
    pinned = {(tensor, dim) for tensor, dim, *_ in parameter_pins(entry)}
    dims: Dict[str, set] = {}
    for r in entry.reasons:
        if r.cause == TENSOR_SHAPE and r.source and r.source not in reranked and not is_zero_one(r) and not is_size_test(r):
            dims.setdefault(r.source, set()).update(d for d in r.dims if (r.source, d) not in pinned)
    return {name: tuple(sorted(d)) for name, d in dims.items() if d}


def describe_shape_evidence(entry: "CodeEntry", name: str) -> str:
    """``tensor shape `x` (dim 0 changed 7 times)`` for messages."""
    n = sum(1 for r in entry.reasons if r.cause == TENSOR_SHAPE and r.source == name and not is_zero_one(r))
    dims = ", ".join(str(d) for d in varying_dims(entry).get(name, ()))
    return f"tensor shape `{name}` (dim {dims} changed {n} time{'s' if n != 1 else ''} in the trace)"


# -- sizes 0 and 1 compiled first: mark_unbacked ---------------------------------
#
# Sizes 0 and 1 are specialised even under dynamic shapes (``dynamic=True``,
# or automatic dynamic after a change): a compiled function first called with
# a batch of 1 compiles for exactly 1 row, and the next batch of 2 recompiles
# (``tensor 'x' size mismatch at index 0. expected 1, actual 2``).  The sizes
# of the graphs show it: an input's dim is 1 (or 0) in one graph and symbolic
# in a later one.  ``maybe_mark_dynamic`` does not lift it (measured on 2.13,
# tests/trace_scripts/batch_one_first.py, vLLM before PR #38933: 2 -> 2
# graphs); ``torch._dynamo.decorators.mark_unbacked(t, dim)`` before the call
# on every input the graphs show so does (2 -> 1).  The recompile reason names
# the first guard that failed (``x``); an input compiled at size 1 beside it
# (``values``) shows only in the graphs, and marking ``x`` alone is no cure
# (2 -> 2).  ``torch._dynamo.mark_unbacked`` does not exist on 2.13: the
# function lives in ``torch._dynamo.decorators``.

#: the call that lifts the 0/1 specialisation (as vLLM's fix writes it)
MARK_UNBACKED = "torch._dynamo.decorators.mark_unbacked"


def graph_input(source: str) -> str:
    """The name dynamo gives the graph input of an argument: ``x`` ->
    ``l_x_``, ``kwargs['cu']`` -> ``l_kwargs_cu_``, ``tokenIds`` ->
    ``l_token_ids_`` (torch 2.13: the source name with every run of other
    characters than letters and digits made ``_``, then fx's snake case)."""
    m = re.match(r"^([A-Za-z_]\w*)(.*)$", source)
    name = f"L['{m.group(1)}']{m.group(2)}" if m else source
    name = re.sub(r"[^a-zA-Z0-9]+", "_", name)
    return re.sub(r"(?<=[a-z])([A-Z])", r"_\1", name).lower()


_STRIDE_INDEX = re.compile(r"stride mismatch at index (\d+)")


def size_one_strides(entry: "CodeEntry", source: str) -> bool:
    """Does every stride guard of ``source`` that failed name a dim the
    graphs show of size 1 (vllm-rbln before 7e0d70ff: `(1, V)` logits with
    stride `(3V, 1)`, the last row of a concatenation)?  ``.contiguous()``
    keeps such a tensor as it is (a size-1 dim does not count for
    ``is_contiguous()``); a view of its own shape gives that dim the stride
    every other call has."""
    key = graph_input(source)
    indexes = {int(m.group(1)) for r in entry.reasons if r.cause == LAYOUT and r.source == source for m in [_STRIDE_INDEX.search(r.text)] if m}
    shapes = [g[key] for g in entry.graph_sizes if key in g]
    if not indexes or not shapes:
        return False
    return all(i < len(shape) and shape[i] == 1 for shape in shapes for i in indexes)


def _local_input(key: str) -> Optional[str]:
    """``l_values_`` -> ``values``; None for a graph node that is no argument
    of the user's (an intermediate, a module's parameter or buffer: ``l_self_…``)."""
    if not (key.startswith("l_") and key.endswith("_")) or len(key) < 4:
        return None
    name = key[2:-1]
    if name == "self" or name.startswith(("self_", "_")):
        return None
    return name


def _size_pairs(entry: "CodeEntry") -> Iterator[Tuple[str, int, object, object]]:
    """(graph input ``l_x_``, dim, size in a graph, size in a later graph)
    for each dim of an argument (same rank; not a module's parameters or
    buffers) of every pair of this code object's graphs: an int for a static
    size, a str for a symbolic one."""
    graphs = entry.graph_sizes
    for i, earlier in enumerate(graphs):
        for key, sizes in earlier.items():
            if _local_input(key) is None or not isinstance(sizes, list):
                continue
            for later in graphs[i + 1 :]:
                other = later.get(key)
                if not isinstance(other, list) or len(other) != len(sizes):
                    continue  # another rank: not the same input's dims
                for dim, (a, b) in enumerate(zip(sizes, other)):
                    yield key, dim, a, b


def _static_then_symbolic(entry: "CodeEntry") -> Iterator[Tuple[str, int, int]]:
    """(graph input ``l_x_``, dim, size) of each dim of an argument a graph of
    this code object compiled at that static size and a later graph
    compiled symbolic (:func:`_size_pairs`)."""
    for key, dim, a, b in _size_pairs(entry):
        if type(a) is int and isinstance(b, str):
            yield key, dim, a


def _symbolic_then_zero_one(entry: "CodeEntry") -> Iterator[Tuple[str, int, int]]:
    """(graph input, dim, size) of each dim a graph of this code object
    compiled symbolic and a later graph at size 0 or 1 (same rank), after
    the 0/1 specialisation guard (``2 <= input_.size()[0]``) failed."""
    if not any(is_zero_one(r) for r in entry.reasons):
        return
    for key, dim, a, b in _size_pairs(entry):
        if isinstance(a, str) and type(b) is int and b in (0, 1):
            yield key, dim, b


def zero_one_sizes(entry: "CodeEntry") -> Dict[str, Dict[int, int]]:
    """Graph input (``l_x_``) -> {dim: size} of the dims a graph of this code
    object compiled at size 0 or 1 and another graph compiled symbolic: the
    0/1 specialisation, of a size seen first (vLLM #38933: batch 1, then 2)
    or after the dim was made symbolic (vLLM #30709: a 1-token decode step
    after the multi-token profile and prefill steps).  Only for a code object
    that recompiled on a tensor shape."""
    if not any(r.cause == TENSOR_SHAPE and not r.stale for r in entry.reasons):
        return {}
    out: Dict[str, Dict[int, int]] = {}
    for key, dim, size in _static_then_symbolic(entry):
        if size in (0, 1):
            out.setdefault(key, {}).setdefault(dim, size)
    for key, dim, size in _symbolic_then_zero_one(entry):
        out.setdefault(key, {}).setdefault(dim, size)
    return out


#: a source that is a path from one name: attributes, int and string keys
_SOURCE_PATH = re.compile(r"""^(?P<name>[A-Za-z_]\w*)(?P<rest>(?:\.[A-Za-z_]\w*|\[(?:\d+|'[^'"]*'|"[^'"]*")\])*)$""")


#: a guard comparing a source with a str or bytes literal (the literal may
#: hold the other quote: ``'it\'s'`` is written ``"it's"`` by torch)
_STRING_GUARD = re.compile(r"""^(?P<src>.+?) == b?(?:'.*'|".*")$""")


def _string_arguments(entry: "CodeEntry") -> List[str]:
    """Arguments of the code object (by their source) whose guards compare
    them with string literals (``text == '[S1] Dia is ...'``)."""
    out: List[str] = []
    for r in entry.reasons:
        m = _STRING_GUARD.match(r.text) if r.cause == CONSTANT and r.source else None
        if m is not None and m.group("src") == r.source and argument_of(r.source) is not None and r.source not in out:
            out.append(r.source)
    return out


def string_guards(entry: "CodeEntry") -> List[str]:
    """The sources (an argument, a local of a frame resumed after a graph
    break, a value on its stack) whose failed guards compare them with a
    str or bytes literal: ``text == '[S1] Dia is ...'``, ``___stack0 ==
    b'\\x01 Dia ...'`` (nari-labs/dia before 5f57172d), ``tasks[0] == 'Open
    the drawer'`` (OpenTau before 1aeed09).  Dynamo never makes a string
    dynamic: each new value is a graph."""
    out: List[str] = []
    for r in entry.reasons:
        if r.cause in (CONSTANT, RESUME_VALUE) and r.source and not r.stale:
            m = _STRING_GUARD.match(r.text)
            if m is not None and m.group("src") == r.source and r.source not in out:
                out.append(r.source)
    return out


def raw_source(source: str) -> Optional[str]:
    """Dynamo's own name of an argument's source, as
    ``torch.compiler.config.dynamic_sources`` takes it: the name the source
    starts with in ``L[...]``, the rest as the guard has it: ``n`` ->
    ``L['n']``, ``kwargs['max_doc_len']`` -> ``L['kwargs']['max_doc_len']``,
    an int an object passed in holds, ``seq_ctx.max_length_k`` ->
    ``L['seq_ctx'].max_length_k`` (xtuner 567df4be), ``args[0].param_groups[0]['step']``
    -> ``L['args'][0].param_groups[0]['step']`` (timm #2704: an optimizer's
    step count in its param group, the compiled ``optimizer.step``'s
    ``*args``), an attribute of ``self``, ``self.layer_idx`` ->
    ``L['self'].layer_idx`` (measured on 2.13: the setting matches each of
    these, and makes an nn.Module's int attribute symbolic too).  None for
    anything that is not such a path."""
    m = _SOURCE_PATH.match(source)
    if m is None:
        return None
    return f"L['{m.group('name')}']" + m.group("rest").replace('"', "'")


def dynamic_int_arguments(entry: "CodeEntry") -> List[str]:
    """Int arguments (by their source) whose new value recompiled the code
    object and that automatic dynamic then made symbolic: not specialised
    by control flow, not needed by an op (those stay guarded whatever is
    marked).  ``torch.compiler.config.dynamic_sources`` makes them symbolic
    from the first compile (OLMo-core 23a3af57's ``max_doc_len``)."""
    counts: Dict[str, int] = {}
    held = set()  # specialised: control flow or an op needs the number
    for r in entry.reasons:
        if r.cause == INT_ARG and r.source and not r.stale:
            counts[r.source] = counts.get(r.source, 0) + 1
            if r.specialized or r.op_site:
                held.add(r.source)
    # one recompile each: then it was symbolic (a value that fails again and
    # again was never made so: dynamic=False, FR001's cure)
    return [src for src, n in counts.items() if n == 1 and src not in held and _argument_path(src)]


def _argument_path(source: str) -> bool:
    """Whether ``source`` is a path :func:`raw_source` names that starts at
    an argument, not at ``self`` (an int attribute of ``self`` is cured by
    FR005's flag, or by :func:`tested_attributes` where it decides a test)."""
    return raw_source(source) is not None and source != "self" and not source.startswith(("self.", "self["))


def tested_attributes(entry: "CodeEntry") -> List[str]:
    """Int attributes of ``self`` (by their source) that decide a test in
    the code object's compiled code (:func:`int_tests`: the guard is on the
    test, so automatic dynamic, or FR005's flag, had made them symbolic) and
    that recompiled first at one specialised value.  Each outcome of the
    test stays a graph, but named in ``dynamic_sources`` the int is symbolic
    from the first compile, and the graph specialised to the first value is
    gone (FastVideo's VSA impl before 3792707: ``self.layer_idx in
    dense_layers``, measured on 2.13: 3 -> 2 graphs; an nn.Module's: 8, the
    limit, -> 2, where FR005's flag gives 3)."""
    first = {r.source for r in entry.reasons if r.cause == MODULE_INT_ATTR and not tested_int(r.text)}
    out: List[str] = []
    for r in int_tests(entry, MODULE_INT_ATTR):
        if r.source in first and r.source.startswith("self.") and raw_source(r.source) and r.source not in out:
            out.append(r.source)
    return out


def hidden_int_arguments(entry: "CodeEntry") -> List[str]:
    """Int arguments (by their source) that a later compile of the code
    object made symbolic and that no guard names: they changed at a call
    where another int's guard failed first, and would fail their own guard
    once that one is made dynamic from the start (xtuner 567df4be:
    ``seq_ctx.max_length_q`` behind ``seq_ctx.max_length_k``, both the
    pack's longest document).  Not an int the first compile already made
    symbolic (marked, or ``dynamic=True``)."""
    named = {r.source for r in entry.reasons if r.source}
    first = {src for number, src in entry.int_symbols if number == 0}
    out: List[str] = []
    for number, src in entry.int_symbols:
        if number > 0 and src not in named and src not in first and src not in out and _argument_path(src):
            out.append(src)
    return out


def dynamic_sources_named(entry: "CodeEntry") -> List[str]:
    """The int arguments (by their source) the ``dynamic_sources`` cure
    names for the code object: those it recompiled on, which automatic
    dynamic then made symbolic (:func:`dynamic_int_arguments`), and those
    hidden behind them (:func:`hidden_int_arguments`); empty when it
    recompiled on no such int."""
    ints = dynamic_int_arguments(entry)
    return ints + [src for src in hidden_int_arguments(entry) if src not in ints] if ints else []


def hidden_varying_dims(entry: "CodeEntry") -> Dict[str, Tuple[int, ...]]:
    """Graph input (``l_kwargs_cu_doc_lens_``) -> dims a graph compiled
    static and a later graph symbolic, for inputs no shape guard of the
    trace names: they changed at a call where another guard failed first
    (OLMo-core's ``cu_doc_lens``, hidden behind ``max_doc_len``), and would
    fail their own size guard once the first is cured.  Not sizes 0 and 1
    (:func:`zero_one_sizes`), not module parameters or buffers."""
    shown = {graph_input(src) for cause in (TENSOR_SHAPE, RANK) for src in entry.sources(cause)}
    out: Dict[str, set] = {}
    for key, dim, size in _static_then_symbolic(entry):
        if key not in shown and size not in (0, 1):
            out.setdefault(key, set()).add(dim)
    return {key: tuple(sorted(dims)) for key, dims in out.items()}


def input_name(entry: "CodeEntry", key: str) -> str:
    """The user's name of graph input ``key``: the guarded source that gives
    it (``x``, ``kwargs['cu']``), else the name it was made from (``values``)."""
    for source in entry.sources(TENSOR_SHAPE):
        if graph_input(source) == key:
            return source
    return _local_input(key) or key


def unbacked_dims(entry: "CodeEntry") -> Dict[str, Tuple[int, ...]]:
    """Tensor (the user's name) -> the dims to mark unbacked
    (:func:`zero_one_sizes`)."""
    return {input_name(entry, key): tuple(sorted(dims)) for key, dims in zero_one_sizes(entry).items()}


def describe_zero_one_evidence(entry: "CodeEntry", key: str, dim: int) -> str:
    """``dim 0 of `values` compiled at size 1, then symbolic`` for messages."""
    size = zero_one_sizes(entry).get(key, {}).get(dim, 1)
    if not any((k, d) == (key, dim) and n in (0, 1) for k, d, n in _static_then_symbolic(entry)):
        # (zero_one_sizes has the dim from the other order)
        return f"dim {dim} of `{input_name(entry, key)}` compiled symbolic, then at size {size}"
    return f"dim {dim} of `{input_name(entry, key)}` compiled at size {size}, then symbolic"


_TYPE_NAME = re.compile(r"type=<class '(?P<name>[^']+)'>")


def made_classes(entry: "CodeEntry") -> List[Tuple[str, str]]:
    """(module, qualified name in it) of each class made inside a
    module-level function that a type guard of ``entry`` names, as
    ``___check_type_id(...), type=<class 'diffusion_convrot.convrot_linear_class.<locals>.ConvRotLinear'>``
    shows it: ("diffusion_convrot", "convrot_linear_class.<locals>.ConvRotLinear").
    A class per call of that function fails the guard (FR019)."""
    out: List[Tuple[str, str]] = []
    for r in entry.reasons:
        if r.cause != TYPE:
            continue
        m = _TYPE_NAME.search(r.text)
        if m is None:
            continue
        parts = m.group("name").split(".")
        if parts.count("<locals>") != 1 or parts.index("<locals>") != len(parts) - 2 or len(parts) < 4:
            continue
        made = (".".join(parts[:-3]), ".".join(parts[-3:]))
        if made not in out:
            out.append(made)
    return out


def rule_cures(entry: "CodeEntry", cause: str) -> List[Cure]:
    """The rules that can cure ``cause`` in ``entry``: those of the cause
    (:func:`cure_table`), but not FR001 for an int or float torch specialised
    (control flow or an op needed the number: removing ``dynamic=False``
    lifts nothing)."""
    cures = list(cure_table().get(cause, ()))
    if any(c.loop_iterator is not None for c in cures):
        iterator = loop_iterators(entry, cause)
        cures = [c for c in cures if c.loop_iterator is None or c.loop_iterator == iterator]
    if cause in (INT_ARG, FLOAT_ARG) and any(r.specialized for r in entry.reasons if r.cause == cause):
        cures = [c for c in cures if c.code != "FR001"]
    if any(c.self_attribute for c in cures) and not any(s == "self" or s.startswith("self.") for s in entry.sources(cause)):
        cures = [c for c in cures if not c.self_attribute]
    if any(c.inference_only for c in cures) and not _inference_mismatch(entry):
        cures = [c for c in cures if not c.inference_only]
    if any(c.strings_only for c in cures) and not string_guards(entry):
        cures = [c for c in cures if not c.strings_only]
    return cures


def rule_cure_codes(entry: "CodeEntry", cause: str, available: Iterable[str], matched: bool = True) -> List[str]:
    """The codes of :func:`rule_cures` present in ``available``, best first;
    not ``matched`` (``available`` are the rules the run has, not those whose
    findings matched): without the cures that depend on a finding's sources
    (``about``), which only a match can name."""
    have = set(available)
    return [c.code for c in rule_cures(entry, cause) if c.code in have and (matched or not c.about)]


def _inference_mismatch(entry: "CodeEntry") -> bool:
    """Do the key sets of a dispatch-key guard of ``entry`` (expected,
    passed) differ only in autograd keys (``ADInplaceOrView``,
    ``AutogradCPU``...): an inference tensor against a normal one?  Which of
    them shows depends on the mode the guard is checked under."""
    for r in entry.reasons:
        if r.cause != DISPATCH:
            continue
        sets = re.findall(r"DispatchKeySet\(([^)]*)\)", r.text)
        if len(sets) == 2:
            a, b = ({k.strip() for k in s.split(",") if k.strip()} for s in sets)
            differ = a ^ b
            if differ and all(k == "ADInplaceOrView" or k.startswith("Autograd") for k in differ):
                return True
    return False


def _state_sources(entry: "CodeEntry", cause: str) -> List[str]:
    """The sources of ``cause`` that are program state rather than what a
    caller passes: a module global (``G['_CACHED_FSDPA_OP']``) or an
    attribute of ``self`` (``self.impl.running_in_graph``, a key of
    ``self.rope_cache``); an argument's None or an argument's attribute stays
    bounded (an optional input), as do a gradient and an optimizer's state
    before the first step."""
    out: List[str] = []
    for r in entry.reasons:
        if r.cause != cause or r.stale or not r.source or r.source.endswith(".grad"):
            continue  # a gradient is None before the first backward: bounded
        if r.source == "self.state" or r.source.startswith("self.state["):
            continue  # an optimizer's state, empty before its first step: bounded
        if _GLOBAL.match(r.text.removeprefix("not ")) or r.source.startswith("self."):
            if r.source not in out:
                out.append(r.source)
    return out


def global_none_checks(entry: "CodeEntry") -> List[Tuple[str, int, str]]:
    """(file, line, global) of each None check of a module global (``G['X']
    is None``, also read through its module, ``G['__import_m'].X is None``)
    the trace saw fail in ``entry``, where the guard names the user's line:
    a global the compiled call itself filled (vllm-gaudi 86bb66e7)."""
    out: List[Tuple[str, int, str]] = []
    for r in entry.reasons:
        if r.cause != NONE_CHECK or r.stale or not r.file or not r.line or not _IDENT.match(r.source):
            continue
        if _GLOBAL.match(r.text.removeprefix("not ")) and (r.file, r.line, r.source) not in out:
            out.append((r.file, r.line, r.source))
    return out


def presence_attribute(text: str) -> str:
    """The attribute a ``hasattr`` guard tests (``not hasattr(self.impl,
    'running_in_graph')``: ``running_in_graph``), "" for another guard."""
    m = _PRESENCE.match(text)
    return m.group("attr")[1:-1] if m and m.group("attr") else ""


def remade_sources(entry: "CodeEntry") -> List[str]:
    """The sources whose deallocation threw the compiled code away, but a
    gradient (``.grad``: freed by ``zero_grad``, which its remedy names)."""
    out: List[str] = []
    for r in entry.reasons:
        if r.cause == INVALIDATED and r.source and not r.source.endswith(".grad") and r.source not in out:
            out.append(r.source)
    return out


def _optional_inputs(entry: "CodeEntry") -> List[str]:
    """The sources of a None check that are what the callers pass (an
    argument, an argument's attribute), not program state
    (:func:`_state_sources`) and not a gradient (None before the first
    backward: bounded, nothing to cure)."""
    state = set(_state_sources(entry, NONE_CHECK))
    out: List[str] = []
    for r in entry.reasons:
        if r.cause != NONE_CHECK or r.stale or not r.source or r.source.endswith(".grad") or r.source in state:
            continue
        if r.source.startswith("self.") or _GLOBAL.match(r.text.removeprefix("not ")):
            continue
        if r.source not in out:
            out.append(r.source)
    return out


def cure_label(entry: "CodeEntry", cause: str, available: Iterable[str], matched: bool = False,
               trace_cures: Iterable[str] = ()) -> str:
    """What cures ``cause`` for this code object: rule codes, and the advice
    the evidence supports (``maybe_mark_dynamic`` for the dims seen to vary,
    ``mark_unbacked`` for those compiled at size 0 or 1 first, "bounded" with
    the count, "report: …"); "none" when nothing is known.  ``matched``:
    ``available`` are the rules whose findings matched the cause (a run's
    table), which may name the cures that depend on a finding's source;
    ``trace_cures``: the names of the trace's own fixes made for it there
    (:mod:`codemods.trace.registry`), which the source decided."""
    from .registry import DYNAMIC_TRUE, FIELD_DTYPE, FLATTEN_CORE, GLOBAL_MEMO, GROWTH_DISABLE, INIT_DEFAULT, NO_MARK, PARAMETER_SHAPES, PARTIAL_REUSE, STRING_DISABLE

    parts = rule_cure_codes(entry, cause, available, matched=matched)
    count = entry.count(cause)
    sources = entry.shown_sources(cause) or "it"
    if cause == TENSOR_SHAPE and DYNAMIC_TRUE.name in trace_cures:
        # the calls pass the varying sizes as ints too: marks would leave
        # one recompile per int (codemods/trace/cures.py: sizes_passed_as_ints)
        parts.append("dynamic=True on its compile (unsafe; its calls pass the varying sizes as ints too, which marks leave specialised)")
    elif cause == TENSOR_SHAPE:
        # sizes 0/1 compiled first (the graphs show them): mark_unbacked, which
        # lifts the 0/1 specialisation; maybe_mark_dynamic for the other dims seen to vary
        unbacked = unbacked_dims(entry)
        marks = [(name, dim, MARK_UNBACKED) for name, dims in unbacked.items() for dim in dims]
        marks += [
            (name, dim, "torch._dynamo.maybe_mark_dynamic")
            for name, dims in varying_dims(entry).items()
            for dim in dims
            if dim not in unbacked.get(name, ())
        ]
        # dims of other inputs hidden behind the guard that failed first (the
        # cure marks them at the same calls: codemods/trace/cures.py mark_dynamic)
        marks += [
            (name, dim, "torch._dynamo.maybe_mark_dynamic")
            for key, dims in hidden_varying_dims(entry).items()
            for name in [_local_input(key)]
            if name is not None and not name.startswith(("args_", "kwargs_"))  # a parameter by its name
            for dim in dims
        ]
        if NO_MARK in trace_cures:
            # no call of the file could take the marks (codemods/trace/cures.py:
            # mark_dynamic's why, in the finding)
            marks = []
            parts.append("no mark can be written before its calls")
        for name, dim, call in marks:
            argument = argument_of(name) or ((name, False) if held_source(name) is not None else None)
            if argument is None:
                continue  # `args[0]` of a wrapper: no name of the user's to mark
            if argument[1]:  # `kwargs['cu_doc_lens']`: the tensor the caller passes by that name
                name = f"<the tensor passed as {argument[0]}>"
            parts.append(f"{call}({name}, {dim})")
        pins = parameter_pins(entry)
        if pins:
            # a dim tied to a parameter's size, which stays static
            # (codemods/trace/config_cures.py: the setting for that function)
            tied = "; ".join(f"dim {dim} of `{tensor}` is tied to the size of `{name}` ({where})" for tensor, dim, name, where, _ in pins)
            if PARAMETER_SHAPES.name in trace_cures:
                parts.append(f"force_parameter_static_shapes=False for it ({tied}, a parameter, whose size stays static)")
            else:
                parts.append(
                    f"report: {tied}, a parameter, whose size stays static under dynamic shapes: "
                    "set torch._dynamo.config.force_parameter_static_shapes = False for this compiled function"
                )
        reranked = [src for src in entry.sources(cause) if src in entry.sources(RANK)]
        if reranked:
            # varying_dims leaves them out: a dim of one rank is another axis of the next
            parts.append(f"no mark for {', '.join(f'`{src}`' for src in reranked)}: its rank changes too, so a dim is another axis at another rank")
        if unbacked:
            seen = sorted({size for dims in zero_one_sizes(entry).values() for size in dims.values()})
            what = f"size {seen[0]}" if len(seen) == 1 else "sizes 0 and 1"
            parts.append(f"{what} specialised even when dynamic (maybe_mark_dynamic does not lift it)")
        if duck_sized(entry):
            parts.append(
                "torch.fx.experimental._config.use_duck_shape = False (duck sizing tied two sizes that were equal once: "
                + ", ".join(f"`{t}`" for t in duck_sized(entry)) + ")"
            )
        if entry.resumed_after.get(CAPTURE_DYNAMIC_SHAPES):
            ops = ", ".join(f"`{op}`" for op in dict.fromkeys(entry.resumed_after[CAPTURE_DYNAMIC_SHAPES]))
            parts.append(
                f"{CAPTURE_DYNAMIC_SHAPES}=True for the compiled function that broke (the sizes come from a graph break at {ops})"
            )
        for r in size_tests(entry):
            parts.append(
                f"report: `{r.text}` tests a dynamic size against a constant{_at(r)} (a slice bound"
                " clamped to the size, a branch on the size); maybe_mark_dynamic cannot lift it:"
                " compute without the test (indexes from arange instead of a slice)"
            )
        zero_one = sum(1 for r in entry.reasons if is_zero_one(r))
        if zero_one and not unbacked:  # (else mark_unbacked above cures them)
            parts.append(
                f"sizes 0/1 specialise: bounded ({recompiles(zero_one)})"
            )
    elif cause == LENGTH and loop_iterators(entry, cause):
        # the iterator of a comprehension (`.0`) or of a loop resumed after a
        # graph break (`___stack1`): a Python loop over values whose count changes
        parts.append(
            f"report: the iterator of a Python loop ({sources}) has a new length every call: "
            "a loop over tensor data (.unbind(), .tolist()) is vectorised or run outside the compiled code"
        )
    elif cause == LAYOUT and any(argument_of(s) or field_of(s) for s in entry.sources(cause)):
        # callers pass different layouts of one tensor: one layout for all
        # (codemods/trace/cures.py: .contiguous() at the calls, or where the
        # compiled code writes the field of the state fed back)
        names = [a[0] for a in (argument_of(s) for s in entry.sources(cause)) if a is not None]
        fields = [f for f in (field_of(s) for s in entry.sources(cause)) if f is not None]
        parts.append(", ".join([f"{n}.contiguous() at the calls" for n in names] + [f"`.contiguous()` where `{f}` is written" for f in fields]))
    elif cause == ALIASING and aliased_pairs(entry):
        # inputs made one tensor by the code that feeds them back
        # (codemods/trace/cures.py: .clone() where the alias is made)
        parts.append(", ".join(f"`.clone()` where `{a}` and `{b}` are made one tensor" for a, b in aliased_pairs(entry)))
    elif cause == DTYPE and field_dtypes(entry):
        # a field of a state fed back, made with another dtype than at the
        # first call (codemods/trace/dtype_fields.py: that dtype where it is made)
        changed = "; ".join(f"`{name}` torch.{e} first, torch.{a} later" for name, e, a in field_dtypes(entry))
        if FIELD_DTYPE.name in trace_cures:
            parts.append(f"the first call's dtype where the field is made with the other ({changed}; unsafe)")
        else:
            parts.append(
                f"report: a field of a state passed in changes dtype between calls ({changed}; {recompiles(count)}): "
                "make it with one dtype wherever it is made (the one of the first call)"
            )
    elif cause in (CONSTANT, RESUME_VALUE) and STRING_DISABLE.name in trace_cures:
        # the function whose frames read the string runs eagerly
        # (codemods/trace/string_disable.py)
        parts.append(f"`@torch.compiler.disable` on the function that reads {sources} (the string stays out of the graph)")
    elif cause in BOUNDED:
        top = entry.causes[0] if entry.causes else cause
        top_named = f"{top} {entry.shown_sources(top)}" if entry.sources(top) else top
        if entry.limit_hit and top != cause and count < entry.count(top):
            # a few recompiles of a bounded cause next to the one that filled the cache
            parts.append(f"bounded ({recompiles(count)}): the limit came from {top_named}")
        elif entry.limit_hit and top != cause and top not in BOUNDED:
            # as many failures as the cause that filled the cache (the entries
            # of its other values fail on it in the same compiles), few values
            ways = len({r.text for r in entry.reasons if r.cause == cause and not r.stale})
            parts.append(f"bounded ({ways} distinct guard failure{'s' if ways != 1 else ''}): the limit came from {top_named}")
        elif entry.limit_hit and cause in REMEDIES:
            parts.append(REMEDIES[cause].format(src=sources))
        elif entry.limit_hit:
            on = f"{cause} {sources}" if entry.sources(cause) else cause
            parts.append(f"report: {count} recompiles on {on} hit the limit")
        elif cause == CONSTANT and _string_arguments(entry):
            # a str argument: a mode flag takes few values, text carries data
            # (nari-labs/dia before 5f57172d: the prompt into a compiled
            # `_prepare_generation`, one graph per prompt)
            names = ", ".join(f"`{a}`" for a in _string_arguments(entry))
            parts.append(
                f"bounded only if {names} takes few values: each new string is a graph ({recompiles(count)} so far); "
                "if it carries data (a prompt, a path), encode it outside the compiled code and pass the tensor"
            )
        elif cause == TRUTH and not parts and any(src.startswith("self.") and src != "self.state" for src in entry.sources(cause)):
            # (an optimizer's `self.state`, empty before its first step: bounded, no cure)
            # a container attribute empty at one call, not at the next
            # (xDiT before PR #781: `update()` of three keys when padding,
            # `pop()` of them otherwise): a graph per truth value, which the
            # project cured by keeping the key set fixed
            parts.append(
                f"report: {sources} is empty at some calls and not at others ({recompiles(count)}: "
                "one graph per truth value): keep its contents fixed between calls (every key present, None when unused) "
                "or pass what it holds as arguments"
            )
        elif cause == DISPATCH and _inference_mismatch(entry):
            # autograd keys in one key set and not the other: a tensor made
            # under torch.inference_mode() against one made outside it
            # (HabanaAI/vllm-fork #1691: warm-up under inference_mode, the
            # worker loop's inputs under no_grad); the cure is one mode
            parts.append(
                f"report: {sources} reached the compiled code once under torch.inference_mode() and once outside it "
                f"(autograd keys in one dispatch key set only: an inference tensor, or a call under the other mode; "
                f"{recompiles(count)}): run the calls and make their inputs under one mode "
                "(inference_mode for the warm-up and the serving loop, or no_grad for both; a mode decorator on an "
                "`async def` does not cover its body: rule FR021)"
            )
        elif cause == RANK and FLATTEN_CORE.name in trace_cures:
            # the body was proven elementwise (codemods/trace/flatten_core.py)
            parts.append(f"an eager wrapper flattens {sources} for the elementwise compiled core (one rank)")
        elif cause == RANK:
            # no dynamic rank in torch: bounded by the ranks callers pass, but
            # the projects cure it (compressed-tensors 55777c4b: an eager
            # wrapper flattens the input of an elementwise compiled core)
            parts.append(
                f"report: one graph per number of dims of {sources} ({recompiles(count)}; "
                "dynamic shapes never make the rank symbolic): call the compiled code with one rank, as an eager "
                "wrapper that flattens the input of an elementwise function and reshapes its output, or accept a graph per rank"
            )
        elif cause == KEYS and INIT_DEFAULT.name in trace_cures:
            # every reader proven to read the default as the missing attribute
            # (codemods/trace/init_default.py)
            parts.append(f"a default in `__init__` for {sources}, which its readers read as the missing attribute")
        elif cause == NONE_CHECK and GLOBAL_MEMO.name in trace_cures:
            # the global's check reads a local, None while compiling
            # (codemods/trace/global_memo.py)
            parts.append(f"{sources} skipped while compiling, a local standing in for it (safe where the value it holds is proven pure: see the finding)")
        elif cause in (NONE_CHECK, KEYS) and not parts and _state_sources(entry, cause):
            # a global or an attribute of `self` unset at one compiled call and
            # set by the next, no rule's memo (vllm-gaudi 86bb66e7: a module
            # global op made on first use inside the compiled attention;
            # vllm-ascend cc9fa548: `running_in_graph` first assigned by the
            # compiled forward, read through hasattr): cured by setting it up
            # before the first compiled call, which no rewrite can place
            names = ", ".join(f"`{n}`" for n in _state_sources(entry, cause))
            how = (
                "is None at one compiled call and set by the next" if cause == NONE_CHECK
                else "is missing at one compiled call and present at the next"
            )
            parts.append(
                f"report: {names} {how} ({recompiles(count)}): set it up before the first "
                "compiled call (a default in `__init__` or where the object is built, a warm-up call), checking its "
                "readers take the same branch; a memo of a pure function of its key can instead be skipped while compiling"
            )
        elif cause == NONE_CHECK and not parts and _optional_inputs(entry):
            # an input (or an input's attribute) None at some calls and a
            # tensor at others (LTX-2 63fd9a4f: the STG block's perturbation
            # mask, None for every other block compiled one by one): one
            # recompile, which the projects cure by passing a value every time
            names = ", ".join(f"`{n}`" for n in _optional_inputs(entry))
            parts.append(
                f"report: {names} is None at some calls and not at others ({recompiles(count)}: "
                "one graph for each): pass a value at every call (a neutral tensor where it is unused: an all-ones mask, "
                "zeros) so one graph serves both, or accept the two graphs"
            )
        elif cause == INVALIDATED and PARTIAL_REUSE.name in trace_cures:
            # a partial installed anew: made once per argument and reused
            # (codemods/trace/partial_reuse.py)
            parts.append(f"{sources}: the functools.partial installed there made once per argument and reused")
        elif cause == INVALIDATED and not parts and remade_sources(entry):
            # a callable installed anew between calls (OneTrainer 3fced711: a
            # functools.partial as each q/k/v layer's `forward`, made again at
            # every re-hook): each re-make costs a compile, for as long as it runs
            names = ", ".join(f"`{n}`" for n in remade_sources(entry))
            parts.append(
                f"report: {names} is freed and made again between calls ({recompiles(count)}: "
                "the compiled code is thrown away each time, for as long as that goes on): torch guards its identity "
                "(a functools.partial, lambda or closure installed anew, a hook registered again); make it once and "
                "reuse it, or install a bound method of a fixed function, whose function and object stay the same"
            )
        else:
            # a rule that cures it names what makes it unbounded (FR019: a
            # class made per call gives every module a type of its own)
            why = BOUNDED_WHY.get(cause)
            parts.append(
                f"{'else bounded' if parts else 'bounded, no fix needed'} ({recompiles(count)}{': ' + why if why else ''})"
            )
    elif cause in (INT_ARG, FLOAT_ARG) and any(r.op_site for r in entry.reasons if r.cause == cause):
        # an op needed the number (torch.as_tensor(crop_box), bernoulli_(p)):
        # specialised whatever `dynamic=` says, so FR001 is no cure
        at = next(r.op_site for r in entry.reasons if r.cause == cause and r.op_site)
        parts.append(f"report: {sources} reaches an op that needs a Python number at {at}: build that tensor outside the compiled code and pass it in, or keep the value fixed")
    elif cause == INT_ARG and any(r.specialized for r in entry.reasons if r.cause == cause):
        # control flow on the value (a range() bound, an if, a list index):
        # dynamic shapes cannot lift it (rule_cures: FR001 is no cure)
        parts.append(f"report: {sources} decides Python control flow (specialised even when dynamic): bucket its values or move the loop out (rule FR009)")
    elif cause == INT_ARG and dynamic_sources_named(entry):
        # automatic dynamic made it symbolic after one recompile: name it
        # dynamic from the first compile (codemods/trace/config_cures.py)
        named = dynamic_sources_named(entry)
        names = "".join(f"{raw_source(src)}," for src in named)
        hidden = f" plus the sizes its graphs show changing with {'them' if len(named) > 1 else 'it'}" if hidden_varying_dims(entry) else ""
        parts.append(f'torch.compiler.config.dynamic_sources += "{names}"{hidden}')
    elif cause == MODULE_INT_ATTR and int_tests(entry, cause):
        # a dynamic int attribute tested against constants (FastVideo's
        # `self.layer_idx in dense_layers`): each outcome of the test is a
        # graph whatever dynamic= or FR005's flag say; named in
        # dynamic_sources, no graph is specialised to its first value
        # (codemods/trace/config_cures.py)
        tests = ", ".join(dict.fromkeys(f"`{r.text}`{_at(r)}" for r in int_tests(entry, cause)))
        tested = tested_attributes(entry)
        outcome = (
            f"each outcome of the test ({tests}) is still a graph: to share one, compare a 0-d tensor of it with a tensor "
            "of the values (`(values == idx).any()`) or decide it outside the compiled code"
        )
        if tested:
            names = "".join(f"{raw_source(src)}," for src in tested)
            parts.append(f'torch.compiler.config.dynamic_sources += "{names}" (no graph specialised to its first value; {outcome})')
        else:
            parts.append(f"report: {sources} decides Python control flow, dynamic or not: {outcome}")
    elif cause == FLOAT_ARG and any(r.specialized for r in entry.reasons if r.cause == cause):
        # a value computed from the float reached an op that needs a Python
        # number: specialised whatever `dynamic=` says (rule_cures: FR001 is no cure)
        parts.append(f"report: {sources} reaches an op that needs a Python number (torch guards a value computed from it): keep it fixed, or use it outside the compiled code")
    elif cause == MODULE_FLOAT_ATTR and any(r.specialized for r in entry.reasons if r.cause == cause):
        parts.append(SPECIALISED_MODULE_FLOAT.format(src=sources))
    elif cause == MODULE_FLOAT_ATTR and dict_attributes(entry):
        # floats of a dict attribute (peft's `scaling[adapter]`): 0-d tensors
        # written into it (codemods/trace/float_state.py)
        attrs = dict_attributes(entry)
        parts.append(", ".join(f"torch.as_tensor(...) at every write of `{a}[...]` (unsafe)" for a in attrs))
    elif cause == LENGTH and GROWTH_DISABLE.name in trace_cures:
        # the function that grows the list runs eagerly (codemods/trace/growth_disable.py)
        parts.append(f"`@torch.compiler.disable` on the function that grows {sources} (the list stays out of the graph)")
    elif cause == PARAMETER_SHAPE and PARAMETER_SHAPES.name in trace_cures:
        # the setting for that compiled function (codemods/trace/config_cures.py)
        parts.append("force_parameter_static_shapes=False for it (a parameter's size made dynamic as other tensors' are)")
    elif cause in REMEDIES and not (matched and any(c.about and c.code in parts for c in rule_cures(entry, cause))):
        # (a rule that matched by the very source guarded names the cure: FR017's
        # `self.state` is no list to keep outside)
        parts.append(REMEDIES[cause].format(src=sources))
    if cause in AUTOMATIC_DYNAMIC and count == 1 and not entry.limit_hit and not any(r.specialized for r in entry.reasons if r.cause == cause):
        # one change, then the value or size was made dynamic: no storm in this run
        parts.append("bounded in this run (1 recompile, then automatic dynamic; a storm needs dynamic=False)")
    return ", ".join(parts) if parts else "none"


def display_location(entry: CodeEntry, relative_to: Optional[str] = None) -> str:
    filename, line = entry.filename, entry.firstlineno
    if is_library_file(filename) and entry.user_frame is not None:
        filename, line = entry.user_frame[0], entry.user_frame[1]
    if relative_to:
        try:
            rel = os.path.relpath(filename, relative_to)
            if not rel.startswith(".."):
                filename = rel
        except ValueError:
            pass
    return f"{filename}:{line}"


def recompiles(count: int) -> str:
    """``"1 recompile"``, ``"3 recompiles"``."""
    return f"{count} recompile{'s' if count != 1 else ''}"


def display_name(entry: CodeEntry) -> str:
    if entry.through:
        return f"{entry.name} (through {entry.through})"
    if entry.library_site is not None and entry.user_frame is not None:
        return entry.user_frame[2]  # the compiled library function, as the user wrote it
    if is_library_file(entry.filename) and entry.user_frame is not None:
        return f"{entry.name} (via {entry.user_frame[2]})"
    at = resumed_at(entry.name)
    if at:  # the code after a graph break, compiled as its own function
        return f"{at[0]} (after the graph break at line {at[1]})"
    return entry.name


def table_rows(
    trace: Trace,
    available: Iterable[str],
    relative_to: Optional[str] = None,
    found: Optional[Dict[Tuple[int, str], Set[str]]] = None,
) -> List[List[str]]:
    """One row per cause of every code object that recompiled or hit the limit;
    code objects compiled without recompiling get one row with cause "-".
    ``found``: (id of a code object, cause) -> the rule codes whose findings
    in the source match it (``run``, after the analysis): the cure names
    those, and says which rules of the cause found nothing there."""
    codes = list(available)
    rows: List[List[str]] = []
    several = len({r for e in trace.entries for r in e.ranks}) > 1
    for entry in trace.entries:
        if not entry.reasons and not entry.limit_hit and entry.graphs == 0:
            continue  # a frame that compiled nothing (e.g. torch's own wrappers)
        shown = display_name(entry)
        if several and entry.ranks:
            shown += f" (rank{'s' if len(entry.ranks) > 1 else ''} {rank_label(entry.ranks)})"
        base = [
            shown,
            display_location(entry, relative_to),
            str(entry.graphs),
            "yes" if entry.limit_hit else "no",
        ]
        causes = entry.causes
        if not causes:
            rows.append(base + ["-", "-"])
            continue
        for cause in causes:
            reasons = [r for r in entry.reasons if r.cause == cause]
            if cause == OTHER:
                label = f"other: {reasons[0].text}"
            else:
                shown = entry.shown_sources(cause)
                label = f"{cause} {shown}" if shown else cause
            if found is None:
                rows.append(base + [label, cure_label(entry, cause, codes)])
                continue
            here = found.get((id(entry), cause), set())
            cure = cure_label(entry, cause, [c for c in codes if c in here], matched=True, trace_cures=here)
            missed = [c for c in rule_cure_codes(entry, cause, codes, matched=False) if c not in here]
            if missed:
                note = f"{', '.join(missed)} found nothing here"
                cure = note if cure == "none" else f"{cure}; {note}"
            rows.append(base + [label, cure])
    return rows


HEADER = ["function", "file:line", "graphs", "limit hit", "cause", "cure"]


def format_table(
    rows: Sequence[Sequence[str]], header: Sequence[str] = HEADER
) -> List[str]:
    widths = [len(h) for h in header]
    for row in rows:
        for i, cell in enumerate(row[:-1]):
            widths[i] = max(widths[i], len(cell))
    lines = []
    for row in [list(header)] + [list(r) for r in rows]:
        cells = [
            cell.ljust(widths[i]) if i < len(row) - 1 else cell
            for i, cell in enumerate(row)
        ]
        lines.append("  ".join(cells).rstrip())
    return lines
