"""``# fix-recompiles: ignore[CODES]`` comments: which lines silence which
rules (read by the engine for every finding, and by FR004 where a fix of one
line is proven by the findings of another)."""

from __future__ import annotations

import io
import re
import tokenize
from typing import Dict, Optional

from ..findings import Finding

_SUPPRESS_RE = re.compile(r"#\s*fix-recompiles:\s*ignore(?:\[([A-Za-z0-9_,\s]+)\])?")


def suppressions(code: str) -> Dict[int, Optional[frozenset]]:
    """line -> None (every code) or the set of codes silenced on that line."""
    result: Dict[int, Optional[frozenset]] = {}
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return result
    for tok in tokens:
        if tok.type != tokenize.COMMENT:
            continue
        match = _SUPPRESS_RE.search(tok.string)
        if not match:
            continue
        line = tok.start[0]
        if match.group(1) is None:
            result[line] = None
        elif line not in result or result[line] is not None:
            codes = frozenset(c.strip() for c in match.group(1).split(",") if c.strip())
            result[line] = (result.get(line) or frozenset()) | codes
    return result


def is_suppressed(finding: Finding, table: Dict[int, Optional[frozenset]]) -> bool:
    if finding.line not in table:
        return False
    codes = table[finding.line]
    return codes is None or any(finding.code.startswith(c) for c in codes)
