"""Monorepo scale: configuration, discovery, output formats, cache, parallel
runs, the byte prefilter, pre-commit hooks."""

from __future__ import annotations

import io
import json
import os
import sys
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codemods.analysis import mentions
from codemods.pipeline import prefilter
from codemods.analysis.context import Settings
from codemods.pipeline.engine import process_source
from codemods.pipeline.runner import run
from codemods.transforms import REGISTRY
from golden import discover_cases, read_inputs

import cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

VARYING = textwrap.dedent(
    """\
    import torch

    @torch.compile(dynamic=False)
    def f(x):
        return x * 2

    for n in range(1, 4):
        f(torch.ones(n))
    """
)
UNSAFE = "import torch\ndef g(x):\n    return x\nh = torch.compile(g, dynamic=False)\n"
CLEAN = "import re\nPATTERN = re.compile('a+')\n"


def write(root, files):
    for rel, text in files.items():
        path = os.path.join(str(root), rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)


def main(args, capsys, stdin=None, monkeypatch=None):
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    if args and args[0] not in ("rules", "run"):
        # the UNSAFE sample has no varying call (an unproven finding): these
        # configuration and output tests ask for such findings
        args = ["check", "--unproven", *(args[1:] if args[0] == "check" else args)]
    with pytest.raises(SystemExit) as exc:
        cli.main(args)
    out, err = capsys.readouterr()
    return exc.value.code, out, err


def report_lines(out):
    return [line for line in out.splitlines() if ": FR" in line]


# -- configuration ---------------------------------------------------------------
def test_config_select_ignore_and_cli_override(tmp_path, monkeypatch, capsys):
    write(tmp_path, {"a.py": UNSAFE, "pyproject.toml": '[tool.fix-recompiles]\nignore = ["FR001"]\n'})
    monkeypatch.chdir(tmp_path)
    code, out, _ = main(["--no-cache", "."], capsys)
    assert code == 0 and report_lines(out) == []
    code, out, _ = main(["--no-cache", "--ignore", "FR002", "."], capsys)  # the flag replaces the config's list
    assert code == 1 and [line.split()[1] for line in report_lines(out)] == ["FR001"]


def test_config_unsafe_fixes_and_dynamic_fix(tmp_path, monkeypatch, capsys):
    write(tmp_path, {"a.py": UNSAFE, "pyproject.toml": '[tool.fix-recompiles]\nunsafe-fixes = true\ndynamic-fix = "true"\n'})
    monkeypatch.chdir(tmp_path)
    code, out, _ = main(["--no-cache", "--fix", "."], capsys)
    assert code == 0
    assert "torch.compile(g, dynamic=True)" in (tmp_path / "a.py").read_text()


def test_unknown_config_key_is_an_error_naming_it(tmp_path, monkeypatch, capsys):
    write(tmp_path, {"a.py": UNSAFE, "pyproject.toml": "[tool.fix-recompiles]\nselekt = ['FR001']\n"})
    monkeypatch.chdir(tmp_path)
    code, out, err = main(["."], capsys)
    assert code == 2 and "'selekt'" in err and "unknown key" in err


def test_closest_pyproject_wins(tmp_path, monkeypatch, capsys):
    write(
        tmp_path,
        {
            "pyproject.toml": '[tool.fix-recompiles]\nignore = ["FR001"]\n',
            "sub/pyproject.toml": '[tool.fix-recompiles]\nselect = ["FR001"]\n',
            "sub/a.py": UNSAFE,
        },
    )
    monkeypatch.chdir(tmp_path)
    code, out, _ = main(["--no-cache", "sub"], capsys)
    assert code == 1 and len(report_lines(out)) == 1


def test_exclude_extend_exclude_and_per_file_ignores(tmp_path, monkeypatch, capsys):
    write(
        tmp_path,
        {
            "pyproject.toml": textwrap.dedent(
                """\
                [tool.fix-recompiles]
                exclude = ["gen/"]
                extend-exclude = ["legacy_*.py"]
                per-file-ignores = { "tests/*" = ["FR001"] }
                """
            ),
            "gen/a.py": UNSAFE,
            "legacy_b.py": UNSAFE,
            "tests/c.py": UNSAFE,
            "src/d.py": UNSAFE,
        },
    )
    monkeypatch.chdir(tmp_path)
    code, out, _ = main(["--no-cache", "."], capsys)
    assert [line.split(":")[0] for line in report_lines(out)] == ["src/d.py"]
    # a file named explicitly is kept ... unless --force-exclude (pre-commit)
    code, out, _ = main(["--no-cache", "gen/a.py"], capsys)
    assert len(report_lines(out)) == 1
    code, out, _ = main(["--no-cache", "--force-exclude", "gen/a.py", "legacy_b.py", "src/d.py"], capsys)
    assert [line.split(":")[0] for line in report_lines(out)] == ["src/d.py"]


def test_force_exclude_honours_default_excludes(tmp_path, monkeypatch, capsys):
    write(tmp_path, {"build/a.py": UNSAFE})
    monkeypatch.chdir(tmp_path)
    assert len(report_lines(main(["--no-cache", "build/a.py"], capsys)[1])) == 1
    assert report_lines(main(["--no-cache", "--force-exclude", "build/a.py"], capsys)[1]) == []


def test_nested_gitignore_and_generated(tmp_path, monkeypatch, capsys):
    write(
        tmp_path,
        {
            "pkg/.gitignore": "skip_me.py\n",
            "pkg/skip_me.py": UNSAFE,
            "pkg/keep.py": UNSAFE,
            "pkg/gen.py": "# @generated by a tool\n" + UNSAFE,
        },
    )
    os.makedirs(tmp_path / ".git")
    monkeypatch.chdir(tmp_path)
    code, out, _ = main(["--no-cache", "--statistics", "."], capsys)
    assert [line.split(":")[0] for line in report_lines(out)] == ["pkg/keep.py"]
    assert "1 generated" in out


def test_files_from_file_and_stdin(tmp_path, monkeypatch, capsys):
    write(tmp_path, {"a.py": UNSAFE, "b.py": UNSAFE, "c.py": UNSAFE, "list.txt": "a.py\n\nc.py\n"})
    monkeypatch.chdir(tmp_path)
    code, out, _ = main(["--no-cache", "--files-from", "list.txt"], capsys)
    assert [line.split(":")[0] for line in report_lines(out)] == ["a.py", "c.py"]
    code, out, _ = main(["--no-cache", "--files-from", "-"], capsys, stdin="b.py\n", monkeypatch=monkeypatch)
    assert [line.split(":")[0] for line in report_lines(out)] == ["b.py"]
    code, out, _ = main(["--no-cache", "--files-from", "-"], capsys, stdin="", monkeypatch=monkeypatch)
    assert code == 0 and report_lines(out) == []


def test_target_torch(tmp_path, monkeypatch, capsys):
    from codemods.pipeline.config import installed_torch, parse_version

    assert parse_version("2.13.0+cpu") == (2, 13)
    assert installed_torch() == (2, 13)  # read from metadata; torch is not imported
    write(tmp_path, {"a.py": UNSAFE})
    monkeypatch.chdir(tmp_path)
    assert main(["--no-cache", "--target-torch", "two", "."], capsys)[0] == 2


# -- output formats ------------------------------------------------------------------
SARIF_SCHEMA = {
    # the structure SARIF 2.1.0 requires of what we emit (from the OASIS schema)
    "type": "object",
    "required": ["version", "runs"],
    "properties": {
        "version": {"enum": ["2.1.0"]},
        "runs": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["tool"],
                "properties": {
                    "tool": {
                        "type": "object",
                        "required": ["driver"],
                        "properties": {
                            "driver": {
                                "type": "object",
                                "required": ["name"],
                                "properties": {
                                    "name": {"type": "string"},
                                    "rules": {
                                        "type": "array",
                                        "items": {"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}}},
                                    },
                                },
                            }
                        },
                    },
                    "results": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["message"],
                            "properties": {
                                "ruleId": {"type": "string"},
                                "ruleIndex": {"type": "integer", "minimum": -1},
                                "level": {"enum": ["none", "note", "warning", "error"]},
                                "message": {"type": "object", "anyOf": [{"required": ["text"]}, {"required": ["id"]}]},
                                "locations": {
                                    "type": "array",
                                    "items": {
                                        "type": "object",
                                        "properties": {
                                            "physicalLocation": {
                                                "type": "object",
                                                "properties": {
                                                    "artifactLocation": {"type": "object", "properties": {"uri": {"type": "string"}}},
                                                    "region": {
                                                        "type": "object",
                                                        "properties": {k: {"type": "integer", "minimum": 1} for k in ("startLine", "startColumn", "endLine", "endColumn")},
                                                    },
                                                },
                                            }
                                        },
                                    },
                                },
                                "fixes": {
                                    "type": "array",
                                    "items": {
                                        "type": "object",
                                        "required": ["artifactChanges"],
                                        "properties": {
                                            "artifactChanges": {
                                                "type": "array",
                                                "minItems": 1,
                                                "items": {
                                                    "type": "object",
                                                    "required": ["artifactLocation", "replacements"],
                                                    "properties": {
                                                        "replacements": {
                                                            "type": "array",
                                                            "minItems": 1,
                                                            "items": {"type": "object", "required": ["deletedRegion"]},
                                                        }
                                                    },
                                                },
                                            }
                                        },
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
    },
}


def test_json_format_parses_and_edits_rebuild_the_fix(tmp_path, monkeypatch, capsys):
    write(tmp_path, {"a.py": VARYING, "b.py": UNSAFE})
    monkeypatch.chdir(tmp_path)
    code, out, err = main(["--no-cache", "--format", "json", "."], capsys)
    data = json.loads(out)
    assert [(d["path"], d["code"], d["safety"]) for d in data] == [("a.py", "FR001", "safe"), ("b.py", "FR001", "unsafe")]
    assert data[0]["line"] == 3 and set(data[0]["end"]) == {"line", "column"}
    # applying the edits of a.py's finding gives the --fix output
    lines = VARYING.splitlines(keepends=True)
    for e in reversed(data[0]["fix"]["edits"]):
        lines[e["start"]["line"] - 1 : e["end"]["line"] - 1] = [e["content"]]
    assert data[1]["fix"]["edits"] is None  # unsafe: not applied without --unsafe-fixes
    main(["--no-cache", "--fix", "a.py"], capsys)
    assert "".join(lines) == (tmp_path / "a.py").read_text()


def test_sarif_validates(tmp_path, monkeypatch, capsys):
    jsonschema = pytest.importorskip("jsonschema")
    write(tmp_path, {"a.py": VARYING, "b.py": UNSAFE})
    monkeypatch.chdir(tmp_path)
    code, out, _ = main(["--no-cache", "--format", "sarif", "."], capsys)
    doc = json.loads(out)
    jsonschema.validate(doc, SARIF_SCHEMA)
    run0 = doc["runs"][0]
    assert [r["ruleId"] for r in run0["results"]] == ["FR001", "FR001"]
    assert "fixes" in run0["results"][0] and "fixes" not in run0["results"][1]
    ids = [r["id"] for r in run0["tool"]["driver"]["rules"]]
    assert all(ids[r["ruleIndex"]] == r["ruleId"] for r in run0["results"])


def test_github_format(tmp_path, monkeypatch, capsys):
    write(tmp_path, {"a.py": VARYING})
    monkeypatch.chdir(tmp_path)
    code, out, _ = main(["--no-cache", "--format", "github", "."], capsys)
    [line] = out.splitlines()
    assert line.startswith("::warning file=a.py,line=3,col=16,") and ",title=FR001::FR001 " in line
    assert code == 1


# -- cache --------------------------------------------------------------------------
def test_cache_hit_miss_invalidation(tmp_path, monkeypatch):
    write(tmp_path, {"a.py": VARYING, "b.py": CLEAN})
    monkeypatch.chdir(tmp_path)
    cache_dir = str(tmp_path / ".fix_recompiles_cache")
    first = run(["."], Settings(), cache_dir=cache_dir)
    assert first.stats.cached == 0 and open(os.path.join(cache_dir, ".gitignore")).read().strip().endswith("*")
    second = run(["."], Settings(), cache_dir=cache_dir)
    # a.py has a fix: a fix is always derived from the file as it is now, never from the cache
    assert second.stats.cached == 1
    assert [(f.code, f.line, f.message, f.safety) for f in second.findings] == [(f.code, f.line, f.message, f.safety) for f in first.findings]
    assert [r.new for r in second.results] == [r.new for r in first.results]
    # a changed file is a miss (same size too: the content hash decides)
    write(tmp_path, {"b.py": CLEAN.replace("a+", "b+")})
    third = run(["."], Settings(), cache_dir=cache_dir)
    assert third.stats.cached == 0
    # other settings: another cache
    assert run(["."], Settings(unsafe_fixes=True), cache_dir=cache_dir).stats.cached == 0


def test_every_setting_is_part_of_the_cache_key():
    """A result is cached for the settings it was made with: changing any
    field of Settings must change the key (a field left out of the key
    replays results made under other settings)."""
    import dataclasses

    from codemods.pipeline.cache import settings_key

    base = Settings()
    changed = {
        "select": frozenset({"FR001"}),
        "ignore": frozenset({"FR003"}),
        "unsafe_fixes": True,
        "dynamic_fix": "true",
        "target_torch": (2, 6),
        "check_syntax": True,
        "unproven": True,
    }
    names = [f.name for f in dataclasses.fields(Settings)]
    assert sorted(changed) == sorted(names), "a new Settings field: add a changed value here"
    for name, value in changed.items():
        assert settings_key(dataclasses.replace(base, **{name: value})) != settings_key(base), name


def test_unproven_after_a_default_run_is_not_served_from_the_cache(tmp_path, monkeypatch, capsys):
    """`check` then `check --unproven` on the same file with the cache on: the
    second run reports the unproven finding (it replayed the first's empty
    result when the key left `unproven` out)."""
    monkeypatch.delenv("FIX_RECOMPILES_NO_CACHE", raising=False)
    monkeypatch.delenv("FIX_RECOMPILES_CACHE_DIR", raising=False)
    write(tmp_path, {"a.py": "import torch\n\ndef f(x):\n    return x * 2\n\ng = torch.compile(f, dynamic=False)\ng(torch.ones(3))\n"})
    monkeypatch.chdir(tmp_path)
    first = run(["."], Settings(), cache_dir=str(tmp_path / ".fix_recompiles_cache"))
    assert first.findings == []
    second = run(["."], Settings(unproven=True), cache_dir=str(tmp_path / ".fix_recompiles_cache"))
    assert [f.code for f in second.findings] == ["FR001"]
    third = run(["."], Settings(), cache_dir=str(tmp_path / ".fix_recompiles_cache"))
    assert third.findings == [] and third.stats.cached == 1


def test_cache_cross_module_invalidation(tmp_path, monkeypatch):
    """A file's result depends on functions compiled in other modules: changing
    the defining module invalidates the user's cached result."""
    write(
        tmp_path,
        {
            "kernels.py": "import torch\n\n@torch.compile\ndef scale(x, c):\n    return x * c\n",
            "train.py": "import torch\nfrom kernels import scale\n\nfor i in range(5):\n    scale(torch.ones(2), i / 7)\n",
        },
    )
    monkeypatch.chdir(tmp_path)
    cache_dir = str(tmp_path / ".fix_recompiles_cache")
    before = run(["."], Settings(), cache_dir=cache_dir)
    if not any(f.path == "train.py" for f in before.findings):
        pytest.skip("no cross-module pass finds anything here yet")
    write(tmp_path, {"kernels.py": "import torch\n\ndef scale(x, c):\n    return x * c\n"})
    after = run(["."], Settings(), cache_dir=cache_dir)
    fresh = run(["."], Settings())
    assert [(f.path, f.code, f.line) for f in after.findings] == [(f.path, f.code, f.line) for f in fresh.findings]
    assert not any(f.path == "train.py" for f in after.findings)


def test_no_cache_flag_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("FIX_RECOMPILES_NO_CACHE", raising=False)
    monkeypatch.delenv("FIX_RECOMPILES_CACHE_DIR", raising=False)
    write(tmp_path, {"a.py": VARYING})
    monkeypatch.chdir(tmp_path)
    main(["--no-cache", "."], capsys)
    assert not (tmp_path / ".fix_recompiles_cache").exists()
    main(["."], capsys)
    assert (tmp_path / ".fix_recompiles_cache" / ".gitignore").exists()


# -- parallel runs and the byte prefilter ---------------------------------------------
def _corpus_files():
    """Golden inputs, rule examples and the shipped examples as {name: text}."""
    files = {}
    for case in discover_cases():
        for rel, data in read_inputs(case).items():
            files[f"golden/{case.id.replace('/', '_')}/{rel}"] = data.decode("utf-8", "surrogateescape")
    for rule in REGISTRY:
        for i, ex in enumerate(rule.invalid):
            files[f"examples/{rule.code}_invalid_{i}.py"] = ex.before
        for i, src in enumerate(rule.valid):
            files[f"examples/{rule.code}_valid_{i}.py"] = src
    examples = os.path.join(ROOT, "examples")
    if os.path.isdir(examples):
        for dirpath, _dirs, names in os.walk(examples):
            for name in names:
                if name.endswith(".py"):
                    with open(os.path.join(dirpath, name), encoding="utf-8", errors="surrogateescape") as fh:
                        files[f"shipped/{os.path.relpath(os.path.join(dirpath, name), examples)}"] = fh.read()
    return files


def _key(result):
    return [(f.path, f.line, f.column, f.code, f.message, f.safety) for f in result.findings], [(r.display_path, r.new, r.error) for r in result.results]


def test_prefilter_never_drops_a_finding(monkeypatch):
    """Every golden input, rule example and shipped example: the same findings
    with the byte prefilter as with every rule run on every file."""
    files = _corpus_files()
    assert len(files) > 10
    settings = Settings(unsafe_fixes=True, unproven=True)
    n_skipped = 0
    for name, text in files.items():
        data = text.encode("utf-8", "surrogateescape")
        monkeypatch.setattr(prefilter, "ENABLED", True)
        with_prefilter = process_source(name, name, data, settings)
        monkeypatch.setattr(prefilter, "ENABLED", False)
        without = process_source(name, name, data, settings)
        assert [(f.code, f.line, f.message) for f in with_prefilter.findings] == [(f.code, f.line, f.message) for f in without.findings], name
        assert with_prefilter.new == without.new, name
        if with_prefilter.error is None:  # a file the prefilter skips gets the byte checks only
            assert without.error is None, name
        n_skipped += with_prefilter.prefiltered and not without.prefiltered
    assert n_skipped > 0  # the prefilter did rule some files out


#: programs with a finding whose compile site is spelled unusually, in a
#: file that also says `compile` in ways that are never a site
_FLOAT_CALLS = "def f(x, beta):\n    return x * beta\n\nfor s in range(3):\n    f(torch.ones(2), 0.5 * s)\n"
_SHAPES = "def f(x):\n    return x * 2\n\nfor n in range(1, 4):\n    f(torch.ones(n))\n"
_CALLS = "for n in range(1, 4):\n    g(torch.ones(n))\n"
_INERT = "if cfg.compile.enable and cfg.compile:\n    build(compile=Compile(x), use_compile=cfg.compile, fn=partial(torch.compile, mode=m))\n"
SITE_SPELLINGS = {
    "comments_in_parens": "import torch\n" + _INERT + "@(torch  # a\n  .compile  # b\n)(dynamic=False)\n" + _SHAPES,
    "alias": "import torch as t\n" + _INERT.replace("torch", "t") + "@t.compile(dynamic=False)\n" + _SHAPES.replace("torch", "t"),
    "imported_name": "import torch\nfrom torch import compile as c\n" + _INERT + "@c(dynamic=False)\n" + _SHAPES,
    "lone_cr": ("import torch\n" + _INERT + "@torch.compile(dynamic=False)  # c\n" + _SHAPES).replace("\n", "\r"),
    "wrap_over_lines": "import torch\n" + _INERT + "def f(x):\n    return x * 2\n\ng = (torch.compile\n     )(f, dynamic=False)\n" + _CALLS,
    "wrap_continued": "import torch\n" + _INERT + "def f(x):\n    return x * 2\n\ng = torch.compile \\\n    (f, dynamic=False)\n" + _CALLS,
    "module_method": "import torch\n" + _INERT + "class M(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n\ng = M()\ng.compile(dynamic=False)\n" + _CALLS,
    "bare_decorator_comments": "import torch\n" + _INERT + "@torch.compile  # fast\n\n# note\n" + _FLOAT_CALLS,
    "bare_decorator_parens": "import torch\n" + _INERT + "@(\n    torch.compile\n)\n" + _FLOAT_CALLS,
    # a decorator below the compile that runs the function with its own
    # arguments (another, `@functools.lru_cache`, hides its body: no finding)
    "bare_decorator_stacked": "import torch\nimport functools\n" + _INERT + "@torch.compile\n@torch.no_grad()\n" + _FLOAT_CALLS,
    "bare_decorator_async": "import torch\n" + _INERT + "@torch.compile\nasync " + _FLOAT_CALLS,
}


@pytest.mark.parametrize("name", sorted(SITE_SPELLINGS))
def test_prefilter_keeps_every_spelling_of_a_site(name, monkeypatch):
    """A compile site spelled unusually, among spellings of `compile` that
    are never a site: the same findings with the byte prefilter as without."""
    data = SITE_SPELLINGS[name].encode()
    settings = Settings(unsafe_fixes=True, unproven=True)
    monkeypatch.setattr(prefilter, "ENABLED", False)
    without = process_source(name, name, data, settings)
    assert without.error is None and without.findings, name
    monkeypatch.setattr(prefilter, "ENABLED", True)
    with_prefilter = process_source(name, name, data, settings)
    assert [(f.code, f.line, f.message) for f in with_prefilter.findings] == [(f.code, f.line, f.message) for f in without.findings]
    assert with_prefilter.new == without.new


@pytest.mark.parametrize(
    "source, no_site",
    [
        (b"import re\nimport torch\nPAT = re.compile('x')\n", True),
        (b"import re, os\nimport torch\nP = re . compile('x')  # compile it\n", True),
        (b"import regex\nimport torch\nP = regex.compile('x')\n", True),
        (b"import torch\nx = 1  # we do not compile anything\n", True),
        # torch.compile under any spelling: parse
        (b"import re\nimport torch\nf = torch.compile(g)\n", False),
        (b"import re\nimport torch\nf = torch . compile(g)\n", False),
        (b"import re\nimport torch\nf = (torch.\n     compile)(g)\n", False),
        (b"import re\nimport torch\nf = (torch.  # note\n     compile)(g)\n", False),
        (b"import re\nimport torch\nf = torch.\\\ncompile(g)\n", False),
        # `re` that may not be the stdlib module: parse
        (b"import torch as re\nf = re.compile(g)\n", False),
        (b"import torch\nimport re\nre = torch\nf = re.compile(g)\n", False),
        (b"import torch, re\ndef k(re):\n    return re.compile(g)\n", False),
        (b"import torch, re\nfor re in mods:\n    re.compile(g)\n", False),
        # a name `compile` (or anything) imported: parse
        (b"import re\nimport torch\nfrom torch import compile\n", False),
        (b"import re\nimport torch\nfrom torch import (\n    compile,\n)\n", False),
        (b"import re\nimport torch\nfrom torch import \\\n    compile\n", False),
        (b"import re\nimport torch\nfrom torch import *\nf = compile(g)\n", False),
        # `compile` only in prose (docstrings, strings, comments): nothing to parse
        (b'import torch\n"""Speed it up with torch.compile(model)."""\nx = 1\n', True),
        (b"import torch\nHELP = 'pass --compile to torch.compile the model'\n", True),
        (b'import torch\ns = "#"; f = torch.compile(g)\n', False),
        (b'import torch\ns = "it\\"s"; f = torch.compile(g)\n', False),
        # model.compile() / self.model.compile()
        (b"import re\nimport torch\nm = Net()\nm.compile()\n", False),
        (b"import re\nimport torch\nself.re.compile()\n", False),
        # `re` in prose does not make `re.compile` unsure; a rebinding does
        (b"import re\nimport torch\n# re is the stdlib module\nP = re.compile('x')\n", True),
        (b'import re, torch\n"""re = torch"""\nP = re.compile(g)\n', True),
        (b"import torch as re\n...\nf = re.compile(g)\n", False),
        (b"import torch, re\n(re\n) = torch\nf = re.compile(g)\n", False),
        # `compile` that is neither called nor a whole decorator: never a site
        (b"import torch\nif cfg.compile.enable and cfg.compile:\n    x = cfg.compile.mode\n", True),
        (b"import torch\ncfg.compile = True\nself.compile: bool = False\n", True),
        (b"import torch\nfrom functools import partial\nc = partial(torch.compile, mode='max-autotune')\n", True),
        (b"import torch\nbuild(compile=Compile(enable=True), use_compile=x)\ndef compile(self, compile):\n    return compile\n", True),
        (b"import torch\nfrom pkg.graph_trainer.compile import apply_compile\napply_compile(model)\ngm.recompile()\n", True),
        (b"import torch\nf = torch.compile if fast else g\nh = [torch.compile][0]\n", True),
        (b"import torch\nf = torch.compile  # kept\nf(model)\n", True),  # a local name, not torch.compile
        (b"import torch\nself.compile = torch.compile\nx = (cfg.compile\n     )\ny = 1\n", True),
        (b"import torch\ncode = compile(src, 'f', 'exec')\n", True),  # the builtin
        # called, or a whole decorator, over comments, line ends, parentheses: parse
        (b"import torch\nself.compile = torch.compile\nself.compile(model)\n", False),
        (b"import torch\nf = torch.compile\n", False),  # the end of the file: unsure
        (b"import torch\n@torch.compile  # fast\n\n# note\ndef f(x):\n    return x\n", False),
        (b"import torch\n@torch.compile\n@other\ndef f(x):\n    return x\n", False),
        (b"import torch\n@torch.compile\nasync def f(x):\n    return x\n", False),
        (b"import torch\n@(\n    torch.compile\n)\ndef f(x):\n    return x\n", False),
        (b"import torch\n@torch.compile  # c\rdef f(x):\r    return x\n", False),  # a lone CR ends the comment
        (b"import torch\nf = (torch  # a\n     .compile  # b\n)(g)\n", False),
        (b"import torch\nf = torch.compile \\\n    (g)\n", False),
        (b"import torch as t\nm = t.compile(m)\n", False),
        (b"from torch import compile as c\nf = c(g)\n", False),
    ],
)
def test_no_compile_site(source, no_site):
    """The byte test that spares the ast parse of files where no `compile`
    can be a site answers True only when no compile site can exist."""
    assert mentions.no_compile_site(source) is no_site
    if no_site:  # and the analysis agrees: no compile site
        from codemods.analysis.compile_sites import CompileModel
        from codemods.pipeline.engine import parse_ast

        assert CompileModel(parse_ast("x.py", source)).compile_sites == []


def test_j1_and_j2_give_the_same_results(tmp_path, monkeypatch):
    files = {name: text for name, text in _corpus_files().items()}
    write(tmp_path, files)
    monkeypatch.chdir(tmp_path)
    one = run(["."], Settings(unsafe_fixes=True), jobs=1)
    two = run(["."], Settings(unsafe_fixes=True), jobs=2)
    assert _key(one) == _key(two)
    assert sum(1 for r in one.results if not r.prefiltered) >= 4  # the pool was used
    cache_dir = str(tmp_path / "cache")
    cold = run(["."], Settings(unsafe_fixes=True), jobs=2, cache_dir=cache_dir)
    warm = run(["."], Settings(unsafe_fixes=True), jobs=2, cache_dir=cache_dir)
    assert _key(cold) == _key(one) == _key(warm)
    # every result without a fix is served from the cache (fixes are re-derived)
    assert warm.stats.cached == len([r for r in cold.results if not r.changed]) > 0
    # a module compiling a function changes: the files whose results depended
    # on the index are looked at again (in the pool), the others stay cached
    write(tmp_path, {"kernels.py": "import torch\n@torch.compile\ndef smooth(x, beta):\n    return x * beta\n", "train.py": "from kernels import smooth\nfor s in range(3):\n    smooth(None, 0.5 * s)\n"})
    partly = run(["."], Settings(unsafe_fixes=True), jobs=2, cache_dir=cache_dir)
    fresh = run(["."], Settings(unsafe_fixes=True), jobs=1)
    assert _key(partly) == _key(fresh)
    assert [f.line for f in partly.findings if f.path == "train.py"] == [3]
    again = run(["."], Settings(unsafe_fixes=True), jobs=2, cache_dir=cache_dir)
    assert _key(again) == _key(fresh) and again.stats.cached == len([r for r in again.results if not r.changed])


def test_a_small_report_needs_no_pool_and_a_pool_gives_the_same(tmp_path, monkeypatch):
    """A report of less than runner.SERIAL_MAX_BYTES of source is looked at in
    this process even with -j2; above it the pool is used, first and second
    look alike, with the same findings (cross-module ones included)."""
    from codemods.pipeline import runner

    files = dict(_corpus_files())
    files["kernels.py"] = "import torch\n\n@torch.compile\ndef scale(x, c):\n    return x * c\n"
    files["train.py"] = "from kernels import scale\nfor i in range(5):\n    scale(None, i / 7)\n"
    write(tmp_path, files)
    monkeypatch.chdir(tmp_path)
    pools = []
    real = runner._look_in_pool

    def counted(tasks, *args):
        pools.append(tasks[0][3])
        return real(tasks, *args)

    monkeypatch.setattr(runner, "_look_in_pool", counted)
    settings = Settings(unproven=True)
    one = run(["."], settings, jobs=1, render=False)
    assert pools == []
    small = run(["."], settings, jobs=2, render=False)
    assert pools == []  # the whole tree is a few KB
    monkeypatch.setattr(runner, "SERIAL_MAX_BYTES", 0)
    pooled = run(["."], settings, jobs=2, render=False)
    assert pools == ["first", "mentions"]
    assert _key(one) == _key(small) == _key(pooled)
    assert [f.code for f in pooled.findings if f.path == "train.py"] == ["FR003"]  # a float to a compiled function of another module
    rendered = run(["."], settings, jobs=2)  # fixes are rendered in workers whatever the size
    assert pools[2:] == ["first", "mentions"] and [f.code for f in rendered.findings if f.path == "train.py"] == ["FR003"]


def test_a_reports_second_look_gives_what_one_analysis_gives(tmp_path, monkeypatch):
    """A report's second look runs only the rules that read the project index
    and keeps the other rules' findings from the first look: over the golden
    inputs, rule examples and examples, with every file given a second look,
    the findings are those of a run whose second look analyses each file
    whole (what rendering fixes does)."""
    from codemods.pipeline import runner
    from codemods.analysis.project import ProjectIndex

    files = dict(_corpus_files())
    files["kernels.py"] = "import torch\n\n@torch.compile\ndef scale(x, c):\n    return x * c\n"
    files["train.py"] = "import torch\nfrom kernels import scale\n\n@torch.compile(dynamic=False)\ndef f(x):\n    return x\n\nfor i in range(5):\n    scale(torch.ones(2), i / 7)\n    f(torch.ones(i + 1))\n"
    write(tmp_path, files)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(ProjectIndex, "concerns", lambda self, path, data: path in self.modules)
    merged = []
    merge = runner.merge_project_findings
    monkeypatch.setattr(runner, "merge_project_findings", lambda first, again: merged.append(first.path) or merge(first, again))
    settings = Settings(unsafe_fixes=True, unproven=True)

    def key(result):
        return [(f.path, f.line, f.column, f.code, f.message, f.safety, f.proven, f.applied) for f in result.findings], [
            (r.display_path, r.error, r.prefiltered, r.pending or r.new is not None) for r in result.results
        ]

    report = run(["."], settings, render=False)
    assert len(merged) == len(report.results) > 100
    rendered = run(["."], settings, render=True)
    assert key(report) == key(rendered)
    train = [f.code for f in report.findings if f.path == "train.py"]
    assert "FR003" in train and "FR001" in train, train  # a cross-module finding next to a first-look one


# -- pre-commit ------------------------------------------------------------------------
def test_pre_commit_hooks_file(tmp_path, monkeypatch, capsys):
    yaml = pytest.importorskip("yaml")
    with open(os.path.join(ROOT, ".pre-commit-hooks.yaml"), encoding="utf-8") as fh:
        hooks = yaml.safe_load(fh)
    by_id = {h["id"]: h for h in hooks}
    assert set(by_id) == {"fix-recompiles", "fix-recompiles-fix"}
    for hook in hooks:
        assert hook["language"] == "python" and hook["types_or"] == ["python", "jupyter"]  # notebooks too, as ruff's hook
        assert "--force-exclude" in hook["args"]
        # pre-commit runs `entry args... files...`; with no files: nothing to do, exit 0
        monkeypatch.chdir(tmp_path)
        argv = hook["entry"].split()[1:] + hook["args"]
        assert main(argv, capsys)[0] == 0


def test_project_index_cache_reuses_unchanged_files_only(tmp_path, monkeypatch):
    """A warm index build only stats files: unchanged ones are not parsed;
    a changed one (new size, or same size and a new mtime) is."""
    import ast
    import time

    from codemods.pipeline import index as project_mod
    from codemods.transforms import PROJECT_FACTS

    FACTS = [fact for _, fact in PROJECT_FACTS]
    kernels = tmp_path / "kernels.py"
    kernels.write_text("import torch\n\n@torch.compile\ndef scale(x, c):\n    return x * c\n")
    old = time.time() - 100  # not "racily clean": size + mtime decide alone
    os.utime(kernels, (old, old))
    cache_dir = str(tmp_path / "cache")
    files = [str(kernels)]
    first = project_mod.build_project_index(files, Settings(), FACTS, cache_dir=cache_dir)
    assert [sorted(fns) for fns in first.compiled.values()] == [["scale"]]

    def no_parse(*args, **kwargs):
        raise AssertionError("parsed a file whose size and mtime did not change")

    with monkeypatch.context() as m:
        m.setattr(ast, "parse", no_parse)  # every parse goes through it (codemods.analysis.source.parse)
        warm = project_mod.build_project_index(files, Settings(), FACTS, cache_dir=cache_dir)
    assert warm.compiled == first.compiled
    # same size, other content, other mtime: parsed again
    kernels.write_text("import torch\n\n@torch.compile\ndef scal2(x, c):\n    return x * c\n")
    os.utime(kernels, (old + 10, old + 10))
    changed = project_mod.build_project_index(files, Settings(), FACTS, cache_dir=cache_dir)
    assert [sorted(fns) for fns in changed.compiled.values()] == [["scal2"]]
    # no longer compiled
    kernels.write_text("import torch\n\ndef scale(x, c):\n    return x * c\n")
    os.utime(kernels, (old + 20, old + 20))
    assert project_mod.build_project_index(files, Settings(), FACTS, cache_dir=cache_dir).compiled == {}


def test_index_names_match_whole_words_only():
    """A file must name a compiled function of another module to call it: as
    a whole word, so a short name (`f`) does not pull in every file."""
    F, G = (b"f", b"m"), (b"g", b"m")
    assert not mentions.mentions_any(b"import m\ndef g(x):\n    return x  # of\n", (F,))
    assert not mentions.mentions_any(b"import m\nfx = f_2 + 1\n", (F,))
    for hit in (b"import m\nf(x)", b"import m as k\nk.f (x, 0.5)", b"from m import f\n", b"from m import (\n    f,\n)", b"from m import f as g\n", b"from . import f\nf(x)"):
        assert mentions.mentions_any(hit, (G, F)), hit
    # read as a value, or in prose: nothing can call it through the index
    assert not mentions.mentions_any(b"m.g()\ny = f\n", (F,))
    assert not mentions.mentions_any(b'm.g()\n"""uses f for speed"""\n', (F,))


def test_index_names_need_their_module():
    """The index resolves a call only through an import that spells the
    defining module (or a relative import): `d.update(x)` in a file that never
    names `optim_kernels` cannot call `optim_kernels.update`."""
    U = (b"update", b"optim_kernels")
    assert not mentions.mentions_any(b"d = {}\nd.update(x=1)\n", (U,))
    assert not mentions.mentions_any(b"import optim_kernels_v2\nd.update(x=1)\n", (U,))
    for hit in (b"from optim_kernels import update\n", b"import pkg.optim_kernels as ok\nok.update(p)\n", b"from .optim_kernels import update\n", b"from . import optim_kernels\noptim_kernels.update(p)\n"):
        assert mentions.mentions_any(hit, (U,)), hit


def test_index_names_through_a_relative_import_need_their_module_too():
    """A relative import that spells a module (``from .utils import x``) does
    not open the file to every name of the index: only one that spells no
    module (``from . import f``, ``from .. import k``) can reach a name of a
    package ``__init__`` without spelling it."""
    U = (b"update", b"optim_kernels")
    assert not mentions.mentions_any(b"from .utils import helper\nd.update(x=1)\n", (U,))
    assert not mentions.mentions_any(b"from .utils import (\n    helper,\n)\nd.update(x=1)\n", (U,))
    for hit in (b"from . import update\nupdate(p)\n", b"from .. import update\n", b"from .import update\nupdate(p)\n", b"from .utils import a\nfrom . import b\nupdate(p)\n"):
        assert mentions.mentions_any(hit, (U,)), hit
    # a name defined by two modules is looked for once, and either module spelled is enough
    assert mentions.mentions_any(b"import other_kernels\nupdate(p)\n", (U, (b"update", b"other_kernels")))


def test_index_names_and_modules_count_in_code_only():
    """A module named in a comment or a docstring (``# after train_gpt.py``)
    or a call in prose resolves nothing; in an f-string's braces it is code."""
    U = (b"update", b"train_gpt")
    assert not mentions.mentions_any(b"# based on train_gpt.py\nupdate(p)\n", (U,))
    assert not mentions.mentions_any(b'"""see train_gpt.update(p)"""\nupdate = 1\n', (U,))
    assert not mentions.mentions_any(b"import train_gpt\n# update(p) is compiled there\n", (U,))
    assert not mentions.mentions_any(b"import train_gpt\nx = 'update(p)'\n", (U,))
    for hit in (
        b"# based on train_gpt.py\nimport train_gpt\ntrain_gpt.update(p)\n",
        b"import train_gpt\nprint(f\"{train_gpt.update(p)}\")\n",
        b"print(rf'{__import__(1)}')\nfrom train_gpt import update\n",
        b"s = 'it''s'\nfrom train_gpt import update\n",
    ):
        assert mentions.mentions_any(hit, (U,)), hit


def test_index_tokens_leave_out_the_files_own_names(tmp_path):
    """A module's own compiled functions are its own analysis's: the index
    neither resolves them for it nor sends it a second look for them.  The
    tokens of a file are those of the functions :func:`_resolve_in` can reach
    from it: a module under its root, or one unique in the run by (module,
    name); a name two folders define alike is reached only beside each."""
    write(
        tmp_path,
        {
            "a/kernels.py": "import torch\n\n@torch.compile\ndef scale(x, c):\n    return x * c\n\nimport kernels\nkernels.scale(x, 0.5)\n",
            "b/kernels.py": "import torch\n\n@torch.compile\ndef shift(x, c):\n    return x + c\n\n@torch.compile\ndef scale(x, c):\n    return x * c\n",
            "a/train.py": "from kernels import scale\nscale(x, 0.5)\n",
            "c/train.py": "from kernels import scale, shift\nscale(x, 0.5)\nshift(x, 0.5)\n",
        },
    )
    from codemods.pipeline import index as project_mod

    files = sorted(str(p) for p in tmp_path.rglob("*.py"))
    index = project_mod.build_project_index(files, Settings())
    mine, other, train, elsewhere = (str(tmp_path / p) for p in ("a/kernels.py", "b/kernels.py", "a/train.py", "c/train.py"))
    assert index.prefilter_tokens(train) is index.names  # the run's one tuple: a's scale, b's unique shift
    # b's scale is not unique and b is not a's root: a/kernels.py can never reach it
    assert index.prefilter_tokens(mine) == ((b"shift", b"kernels"),)
    assert index.prefilter_tokens(other) == ()  # a's scale is not unique and a is not b's root: nothing to look for
    assert index.prefilter_tokens(elsewhere) == ((b"shift", b"kernels"),)
    assert index.resolve(train, "kernels.scale") is not None
    assert index.resolve(mine, "kernels.scale") is None  # never the module asking
    assert index.resolve(other, "kernels.scale") is None
    assert index.resolve(elsewhere, "kernels.scale") is None and index.resolve(elsewhere, "kernels.shift") is not None
    # each token a file lacks is one the index cannot resolve there
    for path in (mine, other, train, elsewhere):
        for name in ("scale", "shift"):
            if (name.encode(), b"kernels") not in index.prefilter_tokens(path):
                assert index.resolve(path, f"kernels.{name}") is None, (path, name)


# -- progress --------------------------------------------------------------------------
@pytest.mark.parametrize("jobs", [1, 2])
def test_progress_counts_every_file_once(tmp_path, monkeypatch, jobs):
    """run() reports progress as (done, total): never backwards, never past
    the total, and it ends at (total, total)."""
    files = {f"m{i:03}.py": (VARYING if i % 50 == 0 else NO_TORCH_TEXT) for i in range(120)}
    write(tmp_path, files)
    monkeypatch.chdir(tmp_path)
    calls = []
    run(["."], Settings(), jobs=jobs, progress=lambda done, total: calls.append((done, total)))
    assert calls and calls[-1] == (120, 120)
    assert all(total == 120 and 0 <= done <= 120 for done, total in calls)
    assert [done for done, _ in calls] == sorted(done for done, _ in calls)


NO_TORCH_TEXT = "def add(a, b):\n    return a + b\n"


def test_progress_bar_only_on_a_terminal(tmp_path):
    """A long run shows a rich progress bar on stderr when it is a terminal
    (pty), and prints nothing of it when stderr is a pipe."""
    import subprocess

    import pexpect

    write(tmp_path, {f"m{i:03}.py": NO_TORCH_TEXT for i in range(400)})
    cli_path = os.path.join(ROOT, "cli.py")
    env = dict(os.environ, FIX_RECOMPILES_NO_CACHE="1", COLUMNS="120")
    child = pexpect.spawn(sys.executable, [cli_path, "check", "-j1", "."], cwd=str(tmp_path), env=env, encoding="utf-8", timeout=120)
    child.expect(pexpect.EOF)
    shown = child.before
    child.close()
    assert child.exitstatus == 0
    assert "fix-recompiles" in shown and "All checks passed!" in shown  # the bar's label, then the summary
    piped = subprocess.run([sys.executable, cli_path, "check", "-j1", "."], cwd=str(tmp_path), env=env, capture_output=True, text=True)
    assert piped.returncode == 0
    assert "fix-recompiles" not in piped.stderr and "━" not in piped.stderr


LIBCST_PROBE = """
import sys
from codemods.analysis.context import Settings
from codemods.pipeline.engine import process_source
source = open(sys.argv[1], "rb").read()
result = process_source("t.py", "t.py", source, Settings(unsafe_fixes=True), render_fixes=sys.argv[2] == "render")
print(len(result.findings), sum(f.fix is not None for f in result.findings), "libcst" in sys.modules)
"""


@pytest.mark.parametrize(
    "text",
    [
        # FR001 with a fix, FR003-style float, a prose "graph-break" (no marker line)
        "import torch\n@torch.compile(dynamic=False)\ndef f(x):\n    return x * 2\nfor n in range(1, 4):\n    f(torch.ones(n))\n"
        "# a graph-break here would split the graph\n",
    ],
)
def test_a_report_never_imports_libcst_and_a_render_does(tmp_path, text):
    """libcst costs 0.2-0.3 s per process to import: a report (findings, their
    fixes not rendered) must not need it, however many fixes it finds."""
    import subprocess

    path = tmp_path / "t.py"
    path.write_text(text)
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    outs = {}
    for mode in ("report", "render"):
        proc = subprocess.run([sys.executable, "-c", LIBCST_PROBE, str(path), mode], capture_output=True, text=True, cwd=repo, timeout=120)
        assert proc.returncode == 0, proc.stderr
        outs[mode] = proc.stdout.split()
    findings, fixes, imported = outs["report"]
    assert int(findings) >= 1 and int(fixes) >= 1 and imported == "False"
    assert outs["render"][2] == "True"


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_no_word_compile_means_no_site(data):
    """prefilter.select skips the rules that need a site on a file without the
    bytes ``compile`` before asking :func:`mentions.no_compile_site`: the two
    must agree."""
    while b"compile" in data:
        data = data.replace(b"compile", b"")
    assert mentions.no_compile_site(data)
    assert mentions.no_compile_site(b"import torch\n" + data + b"\nx.compil\n")


def test_module_keys_with_a_shared_folder_cache(tmp_path, monkeypatch):
    """One index climbs each folder once: the keys are those of one file at a
    time, whatever the spelling of the path (relative, ``./``, ``..``, bare)."""
    from codemods.analysis.project import module_key

    write(tmp_path, {"pkg/__init__.py": "", "pkg/sub/__init__.py": "", "pkg/sub/mod.py": "", "pkg/a.py": "", "top.py": "", "plain/x.py": ""})
    monkeypatch.chdir(tmp_path / "pkg")
    root = str(tmp_path)
    expected = {
        "sub/mod.py": (root, "pkg.sub.mod"),
        "./sub/__init__.py": (root, "pkg.sub"),
        "a.py": (root, "pkg.a"),
        "__init__.py": (root, "pkg"),
        "../top.py": (root, "top"),
        "../plain/x.py": (str(tmp_path / "plain"), "x"),
        "sub/../a.py": (root, "pkg.a"),
    }
    shared: dict = {}
    for path, key in expected.items():
        assert module_key(path) == key, path
        assert module_key(path, shared) == key, path
    assert [module_key(path, shared) for path in expected] == list(expected.values())  # answered from the cache
