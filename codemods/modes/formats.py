"""Machine-readable output: ``--format json|sarif|github`` (``text`` is
:mod:`codemods.modes.output`).

A fix is given as text edits computed by diffing the file's original and fixed
text (line ranges, 1-based, end exclusive, column 1): every finding whose fix
this run applies (or would apply) carries the edits of its file, so applying
the edits of any one of them gives the fixed file.
"""

from __future__ import annotations

import difflib
import json
from typing import Any, Dict, List, Optional, Sequence

from ..findings import Finding
from .output import split_lines

FORMATS = ("text", "json", "sarif", "github")
TOOL_URI = "https://github.com/fix-recompiles/fix-recompiles"


def file_edits(result) -> Optional[List[Dict[str, Any]]]:
    """[{start, end, content}] turning the original text into the fixed one."""
    if not result.changed:
        return None
    before = split_lines(result.original.decode(result.encoding, "surrogateescape"))
    after = split_lines(result.new.decode(result.encoding, "surrogateescape"))
    edits = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        edits.append(
            {
                "start": {"line": i1 + 1, "column": 1},
                "end": {"line": i2 + 1, "column": 1},
                "content": "".join(after[j1:j2]),
            }
        )
    return edits


def _fix_json(f: Finding, edits) -> Optional[Dict[str, Any]]:
    if f.fix is None:
        return None
    return {
        "safety": f.fix.safety.value if f.fix.safety else None,
        "title": f.fix.title,
        "applied": f.applied,
        "edits": edits if f.applied else None,
    }


def to_json(results: Sequence) -> str:
    out = []
    for r in results:
        edits = file_edits(r) if r.findings else None
        for f in r.findings:
            out.append(
                {
                    "path": f.path,
                    "line": f.line,
                    "column": f.column,
                    "end": {"line": f.end_line, "column": f.end_column},
                    "code": f.code,
                    "name": f.rule_name,
                    "message": f.message,
                    "safety": f.safety.value if f.safety else None,
                    "fix": _fix_json(f, edits),
                    **({"cell": f.cell} if f.cell is not None else {}),
                }
            )
    return json.dumps(out, indent=2) + "\n"


def to_sarif(results: Sequence, rules: Sequence, version: str = "0") -> str:
    rule_index = {rule.code: i for i, rule in enumerate(rules)}
    sarif_rules = [
        {
            "id": rule.code,
            "name": rule.name,
            "shortDescription": {"text": rule.summary},
            "fullDescription": {"text": rule.what_it_does.strip()},
            "help": {"text": rule.doc()},
            "defaultConfiguration": {"level": "warning"},
        }
        for rule in rules
    ]
    sarif_results = []
    for r in results:
        edits = file_edits(r) if r.findings else None
        for f in r.findings:
            item: Dict[str, Any] = {
                "ruleId": f.code,
                "level": "warning",
                "message": {"text": f.message},
                "locations": [
                    {
                        "physicalLocation": {
                            "artifactLocation": {"uri": f.path},
                            "region": {
                                "startLine": f.line,
                                "startColumn": f.column,
                                "endLine": f.end_line,
                                "endColumn": f.end_column,
                            },
                        }
                    }
                ],
            }
            if f.code in rule_index:
                item["ruleIndex"] = rule_index[f.code]
            if f.fix is not None:
                item["properties"] = {"fixSafety": f.fix.safety.value if f.fix.safety else None}
            if f.applied and edits and f.fix is not None:
                item["fixes"] = [
                    {
                        "description": {"text": f.fix.title or "fix"},  # type: ignore[union-attr]
                        "artifactChanges": [
                            {
                                "artifactLocation": {"uri": f.path},
                                "replacements": [
                                    {
                                        "deletedRegion": {
                                            "startLine": e["start"]["line"],
                                            "startColumn": 1,
                                            "endLine": e["end"]["line"],
                                            "endColumn": 1,
                                        },
                                        "insertedContent": {"text": e["content"]},
                                    }
                                    for e in edits
                                ],
                            }
                        ],
                    }
                ]
            sarif_results.append(item)
    doc = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": {"name": "fix-recompiles", "version": version, "informationUri": TOOL_URI, "rules": sarif_rules}},
                "results": sarif_results,
            }
        ],
    }
    return json.dumps(doc, indent=2) + "\n"


def _gh_escape(text: str, prop: bool = False) -> str:
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    if prop:
        text = text.replace(":", "%3A").replace(",", "%2C")
    return text


def to_github(findings: Sequence[Finding]) -> str:
    """GitHub Actions workflow commands, one ``::warning`` line per finding."""
    lines = []
    for f in findings:
        lines.append(
            f"::warning file={_gh_escape(f.path, True)},line={f.line},col={f.column},"
            f"endLine={f.end_line},endColumn={f.end_column},title={_gh_escape(f.code, True)}::"
            f"{_gh_escape(f'{f.code} {f.message}')}"
        )
    return "".join(line + "\n" for line in lines)
