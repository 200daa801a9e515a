"""Every registered rule's own examples (Fixit style), run generically.

For each rule, with only that rule selected:

* every ``valid`` snippet produces no finding (even with unsafe fixes on);
* every ``invalid`` example produces at least one finding of the rule;
  - ``after`` given, ``unsafe=False``: ``--fix`` turns ``before`` into ``after``;
  - ``after`` given, ``unsafe=True``: only ``--unsafe-fixes`` does; without it
    the file is left as it was (the fix is held back);
  - ``after`` absent: the finding has no fix, nothing changes either way;
  - ``after`` parses and a second run over it changes nothing.

And ``fix-recompiles rules CODE`` prints the four documentation headings.
"""

from __future__ import annotations

import libcst as cst
import pytest

import cli
from codemods.analysis.context import Settings
from codemods.pipeline.engine import process_source
from codemods.transforms import REGISTRY

VALID = [(rule, i, src) for rule in REGISTRY for i, src in enumerate(rule.valid)]
INVALID = [(rule, i, ex) for rule in REGISTRY for i, ex in enumerate(rule.invalid)]


def run(rule, source: str, *, unsafe: bool, unproven: bool = False):
    settings = Settings(select=frozenset({rule.code}), unsafe_fixes=unsafe, unproven=unproven)
    result = process_source("example.py", "example.py", source.encode("utf-8"), settings)
    assert result.error is None, result.error
    after = result.new.decode("utf-8") if result.new is not None else source
    return result, after


def test_every_rule_has_examples():
    for rule in REGISTRY:
        assert rule.valid, f"{rule.code} has no valid examples"
        assert rule.invalid, f"{rule.code} has no invalid examples"
        if rule.report_only:
            assert all(ex.after is None for ex in rule.invalid), f"{rule.code} is report-only but an example has a fix"
        else:
            assert any(ex.after is not None for ex in rule.invalid), f"{rule.code} has no example of its fix"


def test_codes_and_names_are_unique():
    codes = [rule.code for rule in REGISTRY]
    names = [rule.name for rule in REGISTRY]
    assert len(set(codes)) == len(codes)
    assert len(set(names)) == len(names)


@pytest.mark.parametrize("rule, i, src", VALID, ids=[f"{r.code}-valid{i}" for r, i, _ in VALID])
def test_valid_examples_produce_no_finding(rule, i, src):
    for unsafe in (False, True):
        result, after = run(rule, src, unsafe=unsafe)
        assert result.findings == [], [f.message for f in result.findings]
        assert after == src


@pytest.mark.parametrize("rule, i, ex", INVALID, ids=[f"{r.code}-invalid{i}" for r, i, _ in INVALID])
def test_invalid_examples(rule, i, ex):
    if ex.unproven:
        # what the source cannot prove is reported only on request
        quiet, _ = run(rule, ex.before, unsafe=True)
        assert quiet.findings == [], [f.message for f in quiet.findings]
    result, fixed_safe = run(rule, ex.before, unsafe=False, unproven=ex.unproven)
    assert result.findings, f"{rule.code}: no finding for\n{ex.before}"
    assert all(f.code == rule.code for f in result.findings)
    result_unsafe, fixed_unsafe = run(rule, ex.before, unsafe=True, unproven=ex.unproven)
    assert [f.message for f in result_unsafe.findings] == [f.message for f in result.findings]

    if ex.after is None:
        assert all(f.fix is None for f in result.findings)
        assert fixed_safe == fixed_unsafe == ex.before
        return
    if ex.unsafe:
        assert fixed_unsafe == ex.after
        assert fixed_safe == ex.before, "an unsafe example's fix was applied without --unsafe-fixes"
        assert any(f.fix is not None and f.fix.safety.value == "unsafe" for f in result.findings)
    else:
        assert fixed_safe == ex.after
        assert fixed_unsafe == ex.after
    cst.parse_module(ex.after)
    compile(ex.after, "example.py", "exec")
    # idempotent: nothing more to fix in the fixed code
    again, twice = run(rule, ex.after, unsafe=True, unproven=True)
    assert twice == ex.after
    assert all(f.fix is None for f in again.findings)


@pytest.mark.parametrize("rule", REGISTRY, ids=[r.code for r in REGISTRY])
def test_rules_code_prints_the_four_headings(rule, capsys):
    for query in (rule.code, rule.code.lower(), rule.name):
        with pytest.raises(SystemExit) as exc:
            cli.main(["rules", query])
        assert exc.value.code in (0, None)
        text = capsys.readouterr().out
        assert text.splitlines()[0].startswith(rule.code)
        positions = []
        for heading in ("What it does", "Why it recompiles", "Example", "Fix safety"):
            line = f"## {heading}"
            assert line in text.splitlines(), f"{rule.code}: missing {heading!r}"
            positions.append(text.index(line + "\n"))
            # each heading has some text under it
            body = text.split(line + "\n", 1)[1].split("\n## ", 1)[0]
            assert body.strip(), f"{rule.code}: empty section {heading!r}"
        assert positions == sorted(positions)
