"""The byte prefilter: can any selected rule find something in this file?

The first step of the engine, before any parse: a rule names byte strings
(``Rule.triggers``) one of which a file must contain; a rule that needs a
compile site also skips a file where no spelling of ``compile`` can be one
(:func:`~codemods.analysis.mentions.no_compile_site`: ``re.compile``, ``cfg.compile.enable``,
``compile=True``, prose); a rule that reads the project index runs on
a file that mentions one of the index's names (:func:`~codemods.analysis.mentions.mentions_any`).
Everything that passes is parsed once with the stdlib ``ast`` and analysed
(:mod:`codemods.analysis.compile_sites`); there is no second, cheaper judgement of
what a rule would find, so nothing here can drop a finding that the rules'
own analysis would make, except by a byte test that the tests compare with
and without (``FIX_RECOMPILES_NO_PREFILTER=1``: every selected rule on every
file that parses).
"""

from __future__ import annotations

import os
from typing import List, Sequence, Tuple

from ..analysis.mentions import mentions_any, no_compile_site

#: False: every selected rule runs on every file (tests compare findings with and without)
ENABLED = os.environ.get("FIX_RECOMPILES_NO_PREFILTER", "") in ("", "0")


def select(data: bytes, rules: Sequence, extra: Sequence[Tuple[bytes, bytes]] = (), always: bool = False) -> Tuple[List, bool]:
    """(the rules that may find something in ``data``, whether it mentions a
    name of the project index ``extra``; ``always``: the index concerns the
    file whatever it mentions)."""
    cross = always or (bool(extra) and mentions_any(data, extra))
    if not ENABLED:
        return list(rules), cross
    no_site = None
    out = []
    found: dict = {}  # trigger -> in data: each distinct trigger scanned once (most rules share b"compile")
    for rule in rules:
        if cross and rule.reads_project:
            out.append(rule)
            continue
        if rule.needs_compile_site:
            has = found.get(b"compile")
            if has is None:
                has = found[b"compile"] = b"compile" in data
            if not has:
                continue  # no site without the word (no_compile_site would say so, slower)
        hit = False
        for t in rule.triggers:
            there = found.get(t)
            if there is None:
                there = found[t] = t in data
            if there:
                hit = True
                break
        if hit:
            if rule.needs_compile_site:
                if no_site is None:
                    no_site = no_compile_site(data)
                if no_site:
                    continue
            out.append(rule)
    return out, cross
