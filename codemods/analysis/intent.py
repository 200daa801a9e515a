"""Signs that a static compile is deliberate.

Real training code keeps ``dynamic=False`` on purpose (max-autotune, CUDA
graphs, "dynamic is much slower here") and says so: a comment at the compile,
a recompile limit raised for the variants it compiles on purpose,
``torch._dynamo.utils.disable_cache_limit()`` around the calls, or
``torch._dynamo.mark_static`` on the inputs.  Such a site gets no default
finding: removing ``dynamic=False`` there is a judgement a person makes.
"""

from __future__ import annotations

import ast
import re
from typing import Optional

from .compile_sites import CompileModel, CompileSite
from .placement import config_mentions

#: the recompile limit, by both names
LIMIT_NAMES = ("cache_size_limit", "recompile_limit")
#: words of a comment that explains a static compile
_INTENT = re.compile(r"dynamic|static|slow|faster|shape|recompil|autotune|cuda.?graph|deliberate|on purpose|intention|precompil|warm.?up", re.I)
#: a comment that leaves the choice open (a to-do) explains nothing
_OPEN_QUESTION = re.compile(r"#+\s*(TODO|FIXME|XXX)\b", re.I)
#: calls that show variants are compiled on purpose, or inputs kept static
_MARKERS = {
    "disable_cache_limit": "the calls run under `disable_cache_limit()`",
    "mark_static": "inputs are marked static (`mark_static`)",
    "mark_static_address": "inputs are marked static (`mark_static_address`)",
}


def static_intent(model: CompileModel, site: CompileSite) -> Optional[str]:
    """Why ``site``'s static compile looks deliberate, or None."""
    source = model.source
    first = min(site.node.lineno, getattr(site.statement, "lineno", site.node.lineno))  # type: ignore[attr-defined]
    decorators = getattr(site.statement, "decorator_list", None) or []
    if decorators:
        first = min(first, min(d.lineno for d in decorators))
    last = getattr(site.options_call, "end_lineno", None) or site.node.end_lineno  # type: ignore[attr-defined]
    for line, _col, text in source.comments_in(first - 1, last):
        if _OPEN_QUESTION.match(text):
            continue  # "TODO: dynamic True/False think through" (nanochat): a question, not a decision
        if _INTENT.search(text) and "fix-recompiles:" not in text:
            return f"the comment on line {line} explains it"
    found = config_mentions(source, LIMIT_NAMES)
    if found:
        return f"the module raises the recompile limit (line {found[0].lineno})"  # type: ignore[attr-defined]
    if not any(marker.encode() in source.data for marker in _MARKERS):
        return None
    for node in sorted(source.nodes(ast.Attribute) + source.nodes(ast.Name), key=lambda n: (n.lineno, n.col_offset)):  # type: ignore[attr-defined]
        name = node.attr if isinstance(node, ast.Attribute) else node.id  # type: ignore[attr-defined]
        if name in _MARKERS:
            return f"{_MARKERS[name]} (line {node.lineno})"  # type: ignore[attr-defined]
    return None
