"""Issue 28: Jupyter notebooks, as ruff checks them: ``check``, ``--diff``,
``--fix`` on ``.ipynb`` files cell by cell (codemods/pipeline/notebook.py).
Positions are a cell and a line in it, IPython lines (magics, shell escapes)
are left alone, the fixes go back into the JSON with its outputs, metadata
and layout kept; a notebook that is not valid JSON is one error line, exit 2."""

from __future__ import annotations

import json
import subprocess
import sys

from test_cli import err, fr, out

CELLS = [
    {"cell_type": "markdown", "metadata": {}, "source": ["# Training\n", "Ragged batches, `dynamic=False`."]},
    {"cell_type": "code", "execution_count": 1, "metadata": {}, "outputs": [], "source": ["%matplotlib inline\n", "import torch\n", "!echo hi"]},
    {
        "cell_type": "code",
        "execution_count": 2,
        "metadata": {"tags": ["model"]},
        "outputs": [{"name": "stdout", "output_type": "stream", "text": ["ok\n"]}],
        "source": ["@torch.compile(dynamic=False, backend=\"eager\")\n", "def f(x):\n", "    return (x * 2).sum()"],
    },
    {"cell_type": "code", "execution_count": 3, "metadata": {}, "outputs": [], "source": ["total = 0.0\n", "for n in range(1, 7):\n", "    total += float(f(torch.ones(n)))\n", "files = !ls"]},
    {"cell_type": "code", "execution_count": 4, "metadata": {}, "outputs": [], "source": ["%%time\n", "x = 1"]},
    {"cell_type": "code", "execution_count": 5, "metadata": {}, "outputs": [], "source": "print(\"total\", total)"},
]
NB = {"cells": CELLS, "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}}, "nbformat": 4, "nbformat_minor": 5}


def nbformat_bytes(doc) -> bytes:
    """How Jupyter saves a notebook (nbformat: one space, sorted keys, UTF-8)."""
    return (json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode()


def test_findings_are_placed_in_their_cell(tmp_path):
    (tmp_path / "train.ipynb").write_bytes(nbformat_bytes(NB))
    proc = fr(tmp_path, ".")
    assert proc.returncode == 1, err(proc)
    lines = [ln for ln in out(proc).splitlines() if ln.startswith("train.ipynb")]
    assert lines[0].startswith("train.ipynb:cell 3:1:16: FR001 [*] `dynamic=False` but inputs vary (cell 4, line 3: "), lines
    assert (tmp_path / "train.ipynb").read_bytes() == nbformat_bytes(NB)  # a report writes nothing


def test_fix_writes_the_cells_back_and_keeps_the_rest(tmp_path):
    path = tmp_path / "train.ipynb"
    path.write_bytes(nbformat_bytes(NB))
    proc = fr(tmp_path, "--fix", ".")
    assert proc.returncode == 0, err(proc) + out(proc)
    fixed = json.loads(path.read_bytes())
    assert fixed["cells"][2]["source"] == ["@torch.compile(backend=\"eager\")\n", "def f(x):\n", "    return (x * 2).sum()"]
    # every other cell, the outputs, the metadata and the IPython lines as they were
    expected = json.loads(nbformat_bytes(NB))
    expected["cells"][2]["source"] = fixed["cells"][2]["source"]
    assert fixed == expected
    assert path.read_bytes() == nbformat_bytes(expected)  # Jupyter's layout kept
    again = fr(tmp_path, "--fix", ".")
    assert again.returncode == 0 and path.read_bytes() == nbformat_bytes(expected)  # a second run changes nothing


def test_diff_shows_the_json_lines_that_change(tmp_path):
    (tmp_path / "train.ipynb").write_bytes(nbformat_bytes(NB))
    proc = fr(tmp_path, "--diff", ".")
    assert proc.returncode == 1
    changed = [ln for ln in out(proc).splitlines() if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]
    assert changed == ['-    "@torch.compile(dynamic=False, backend=\\"eager\\")\\n",', '+    "@torch.compile(backend=\\"eager\\")\\n",']


def test_a_notebook_that_is_not_json_is_one_error_line(tmp_path):
    (tmp_path / "bad.ipynb").write_text('{"cells": [')
    (tmp_path / "train.ipynb").write_bytes(nbformat_bytes(NB))
    proc = fr(tmp_path, ".")
    assert proc.returncode == 2
    errors = [ln for ln in err(proc).splitlines() if ln.startswith("error:")]
    assert errors == ["error: bad.ipynb: not a valid notebook: JSON error at line 1, column 12: Expecting value"]
    assert "train.ipynb:cell 3:1:16: FR001" in out(proc)  # the run went on


def test_a_layout_that_cannot_be_kept_is_not_written(tmp_path):
    odd = json.dumps(NB, indent=3).replace('": ', '":  ').encode()  # no JSON writer makes this
    (tmp_path / "odd.ipynb").write_bytes(odd)
    proc = fr(tmp_path, "--fix", ".")
    assert proc.returncode == 2
    assert "error: odd.ipynb: fixes not applied: this notebook's JSON layout cannot be kept" in err(proc)
    assert (tmp_path / "odd.ipynb").read_bytes() == odd


def _run_cells(path) -> str:
    """Run a notebook's code cells as a script (IPython lines dropped), with
    the graphs dynamo compiled printed last."""
    doc = json.loads(path.read_bytes())
    code = []
    for cell in doc["cells"]:
        if cell["cell_type"] != "code":
            continue
        text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if text.lstrip().startswith("%%"):
            text = text.split("\n", 1)[1]
        code.extend(ln for ln in text.split("\n") if not ln.lstrip().startswith(("%", "!")) and "= !" not in ln)
    code.append("import torch._dynamo.utils as u; print('graphs', u.counters['stats']['unique_graphs'])")
    proc = subprocess.run([sys.executable, "-c", "\n".join(code)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_runtime_the_fixed_notebook_compiles_fewer_graphs_same_output(tmp_path):
    path = tmp_path / "train.ipynb"
    path.write_bytes(nbformat_bytes(NB))
    before = _run_cells(path).splitlines()
    assert fr(tmp_path, "--fix", ".").returncode == 0
    after = _run_cells(path).splitlines()
    assert before[0] == after[0]  # total 42.0
    n_before, n_after = int(before[1].split()[1]), int(after[1].split()[1])
    assert n_after < n_before, (before, after)


def test_json_output_names_the_cell(tmp_path):
    (tmp_path / "train.ipynb").write_bytes(nbformat_bytes(NB))
    proc = fr(tmp_path, "--format", "json", ".")
    [finding] = json.loads(out(proc))
    assert (finding["path"], finding["cell"], finding["line"], finding["code"]) == ("train.ipynb", 3, 1, "FR001")


def _review(tmp_path, answers: str, monkeypatch):
    import io

    from codemods.analysis.context import Settings
    from codemods.modes.interactive import run_interactive

    monkeypatch.chdir(tmp_path)
    out_, err_ = io.StringIO(), io.StringIO()
    code = run_interactive(["."], Settings(), io.StringIO(answers), out_, err_, color=False)
    return code, out_.getvalue(), err_.getvalue()


def test_interactive_review_shows_the_cell_and_writes_the_json(tmp_path, monkeypatch):
    """``-i`` on a notebook: the fix is shown at its cell, as a diff of that
    cell's code; accepted, it goes back into the JSON as ``--fix`` writes it."""
    path = tmp_path / "train.ipynb"
    path.write_bytes(nbformat_bytes(NB))
    code, shown, errors = _review(tmp_path, "y\n", monkeypatch)
    assert code == 0, shown + errors
    assert "(1/1) train.ipynb:cell 3:1:16: FR001 `dynamic=False` but inputs vary (cell 4, line 3: " in shown
    assert "--- a/train.ipynb:cell 3\n+++ b/train.ipynb:cell 3\n" in shown
    assert '-@torch.compile(dynamic=False, backend="eager")\n+@torch.compile(backend="eager")\n' in shown
    assert "__fix_recompiles_cell__" not in shown and "wrote 1 fix to " in shown
    expected = json.loads(nbformat_bytes(NB))
    expected["cells"][2]["source"] = ["@torch.compile(backend=\"eager\")\n", "def f(x):\n", "    return (x * 2).sum()"]
    assert path.read_bytes() == nbformat_bytes(expected)  # as --fix writes it: outputs, IPython lines, layout kept


def test_interactive_review_rejected_writes_nothing(tmp_path, monkeypatch):
    path = tmp_path / "train.ipynb"
    path.write_bytes(nbformat_bytes(NB))
    code, shown, _ = _review(tmp_path, "n\n", monkeypatch)
    assert code == 1 and "wrote" not in shown
    assert path.read_bytes() == nbformat_bytes(NB)
