"""How the fixtures here were made: ``python trim.py record NAME...`` copies
``../trace_scripts/NAME.py`` to a scratch folder, runs it under the installed
torch with ``TORCH_TRACE=DIR`` and writes ``NAME.log``: the records
codemods/trace.py reads (with only the fields it reads), one payload-carrying
record (so the parser's skipping of payload lines is tested), and every path of
the recording machine replaced by a placeholder (:data:`PLACEHOLDERS`).

Tests read a fixture through :func:`load`, which puts this machine's paths
back: ``@SCRIPTS@`` is tests/trace_scripts, ``@SITE@`` the site-packages
folder, ``@STDLIB@`` the standard library.  ``python trim.py DIR OUT.log``
trims an existing trace folder without placeholders."""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile

#: where the fixtures are read and recorded: this folder (torch 2.13, what
#: the suite and CI read), or FIX_RECOMPILES_FIXTURES (benchmarks/torch_matrix.sh
#: records every script again under another torch release there and runs the
#: classifier's tests on them)
HERE = os.environ.get("FIX_RECOMPILES_FIXTURES") or os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "trace_scripts")

KEEP = ("str", "dynamo_start", "dynamo_output_graph", "create_symbol", "symbolic_shape_specialization", "compilation_metrics")
#: of a ``create_symbol`` record, the fields read (an int argument made symbolic)
SYMBOL = ("symbol", "val", "source")
#: of a ``symbolic_shape_specialization`` record, the fields read (a size
#: user code fixed to one value; its torch stack is left out)
SPECIALIZATION = ("symbol", "sources", "value", "reason", "user_stack")
METRICS = (
    "co_name",
    "co_filename",
    "co_firstlineno",
    "recompile_reason",
    "fail_type",
    "fail_reason",
    "cache_size",
    "graph_op_count",
    "restart_reasons",
)


def _limit_of(config):
    """The recompile limit of a compile's ``dynamo_config`` (a JSON string)."""
    if not isinstance(config, str):
        return None
    try:
        values = json.loads(config)
    except ValueError:
        return None
    value = values.get("recompile_limit", values.get("cache_size_limit"))
    return value if isinstance(value, int) else None


def trim_lines(src: str):
    import glob

    lines_out = []
    kept_payload = False
    for path in sorted(glob.glob(f"{src}/*")):
        with open(path, encoding="utf-8") as fh:
            lines = fh.readlines()
        i = 0
        while i < len(lines):
            line = lines[i]
            i += 1
            if line.startswith("\t"):
                continue
            start = line.find("] {") + 2
            prefix, record = line[:start], json.loads(line[start:])
            payload = []
            while i < len(lines) and lines[i].startswith("\t"):
                payload.append(lines[i])
                i += 1
            key = next((k for k in KEEP if k in record), None)
            if key is None:
                if (record.get("artifact") or {}).get("name") == "recompile_reasons":
                    lines_out.append(line)  # what a recompile_reason leaves out: every cache entry's failure
                    lines_out.extend(payload)
                    continue
                if payload and not kept_payload:  # one payload record, as it appears
                    kept_payload = True
                    lines_out.append(line)
                    lines_out.extend(payload)
                continue
            if key == "compilation_metrics":
                limit = _limit_of(record[key].get("dynamo_config"))
                record[key] = {k: record[key].get(k) for k in METRICS}
                if limit is not None:  # of the whole config, the recompile limit the run had
                    record[key]["dynamo_config"] = {"recompile_limit": limit}
            if key == "dynamo_output_graph":
                record.pop("has_payload", None)
            if key == "create_symbol":
                record[key] = {k: record[key].get(k) for k in SYMBOL}
            if key == "symbolic_shape_specialization":
                record[key] = {k: record[key].get(k) for k in SPECIALIZATION}
            lines_out.append(prefix + json.dumps(record) + "\n")
    return lines_out


def trim(src: str, out: str) -> None:
    with open(out, "w", encoding="utf-8") as fh:
        fh.writelines(trim_lines(src))


def _site() -> str:
    return sysconfig.get_paths()["purelib"]


def _stdlib() -> str:
    return sysconfig.get_paths()["stdlib"]


def placeholders(scripts: str):
    """(placeholder, path on this machine), longest path first."""
    pairs = [("@SCRIPTS@", scripts), ("@SITE@", _site()), ("@STDLIB@", _stdlib())]
    return sorted(pairs, key=lambda p: -len(p[1]))


def _short(path: str) -> str:
    """torch's ``shorten_filename`` (the file names in guard comments): the path
    past its common prefix with the torch package folder."""
    base = os.path.join(_site(), "torch")
    try:
        prefix = os.path.commonpath([path, base])
    except ValueError:
        return path
    return path[len(prefix) + 1 :]


def to_placeholders(text: str, scripts: str) -> str:
    for name, path in placeholders(scripts):
        # torch may name a file by its real path (a venv reached through a link)
        for form in dict.fromkeys([path, os.path.realpath(path)]):
            text = text.replace(json.dumps(form)[1:-1], name).replace(form, name)
    # guard comments name the script by a path relative to wherever torch was
    short = _short(scripts)
    if short and short != scripts:
        text = text.replace(short, "tests/trace_scripts")
    return text


def fill(text: str, scripts: str = SCRIPTS) -> str:
    """A fixture's text with this machine's paths (JSON-escaped) put back."""
    for name, path in placeholders(scripts):
        text = text.replace(name, json.dumps(path)[1:-1])
    return text


def load(name: str, scripts: str = SCRIPTS) -> str:
    with open(os.path.join(HERE, f"{name}.log"), encoding="utf-8") as fh:
        return fill(fh.read(), scripts)


def record(name: str) -> None:
    scratch = tempfile.mkdtemp(prefix="record-")
    try:
        # recorded from <scratch>/repo/tests/trace_scripts: torch's short paths
        # in guard comments then read repo/tests/trace_scripts/NAME.py
        scripts = os.path.join(scratch, "repo", "tests", "trace_scripts")
        os.makedirs(scripts)
        shutil.copy(os.path.join(SCRIPTS, f"{name}.py"), scripts)
        folder = os.path.join(scratch, "trace")
        env = dict(os.environ, TORCH_TRACE=folder)
        env.pop("TORCH_COMPILE_JOB_ID", None)
        proc = subprocess.run(
            [sys.executable, f"{name}.py"], cwd=scripts, env=env, check=False
        )
        print(f"{name}: exit {proc.returncode}", file=sys.stderr)
        text = to_placeholders("".join(trim_lines(folder)), scripts)
        left = [w for w in (scratch, _site(), _stdlib(), os.path.expanduser("~")) if w in text]
        assert not left, f"{name}: paths left in the fixture: {left}"
        with open(os.path.join(HERE, f"{name}.log"), "w", encoding="utf-8") as fh:
            fh.write(text)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    if sys.argv[1] == "record":
        for n in sys.argv[2:]:
            record(n)
    else:
        trim(sys.argv[1], sys.argv[2])
