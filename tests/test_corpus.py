"""Real-code robustness on a small subset of the installed torch's own source
(found without importing torch): every pass with unsafe fixes, no crash, every
changed file parses, a second run changes nothing.  The full run is
``python scripts/check_corpus.py <site-packages>/torch``."""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import check_corpus  # noqa: E402

# real files that mention compile / optimizers: every pass runs on them (prefilter off)
FILES = (
    os.path.join("optim", "sgd.py"),
    os.path.join("optim", "adam.py"),
    os.path.join("optim", "lr_scheduler.py"),
    os.path.join("_vendor", "quack", "mx_utils.py"),  # torch.compile(fn, dynamic=True)
    os.path.join("utils", "_content_store.py"),  # a user decorator called with dynamic=True
    os.path.join("utils", "benchmark", "utils", "compile.py"),
    os.path.join("_dynamo", "testing.py"),
    os.path.join("nn", "modules", "activation.py"),
)
# whole folders through the normal run (discovery + byte prefilter + the rules)
FOLDERS = ("optim", os.path.join("nn", "modules"))


def torch_dir():
    spec = importlib.util.find_spec("torch")  # locates the package, does not import it
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("torch is not installed")
    return list(spec.submodule_search_locations)[0]


def assert_clean(report):
    text = "\n".join(report.lines())
    assert not report.crashes, text
    assert not report.not_idempotent, text
    assert not report.errors, text


def test_torch_files_every_pass_no_crash():
    base = torch_dir()
    paths = [os.path.join(base, p) for p in FILES if os.path.exists(os.path.join(base, p))]
    assert len(paths) >= 5, f"too few of {FILES} under {base}"
    old = check_corpus.set_prefilter(False)
    try:
        report = check_corpus.check(paths)
    finally:
        check_corpus.set_prefilter(old)
    assert report.files == len(paths)
    assert report.prefiltered == 0, report.lines()  # every file really went through every rule
    assert_clean(report)


def test_torch_folders_no_crash():
    base = torch_dir()
    report = check_corpus.check([os.path.join(base, f) for f in FOLDERS])
    assert report.files >= 40, report.lines()
    assert_clean(report)


def test_check_catches_a_crash(tmp_path, monkeypatch):
    """The check itself can fail: a pass that raises is reported as a crash."""
    from codemods.transforms import REGISTRY

    def boom(ctx):
        raise ValueError("deliberate")

    monkeypatch.setattr(REGISTRY[0], "check", boom)
    src = tmp_path / "m.py"
    src.write_text("import torch\nf = torch.compile(len, dynamic=False)\n")
    report = check_corpus.check([str(tmp_path)])
    assert [p for p, _ in report.crashes] == [str(src)]
    assert not report.ok


def test_check_counts_bad_input_as_error_not_crash(tmp_path):
    (tmp_path / "bad.py").write_text("import torch\ntorch.compile(\n")
    (tmp_path / "good.py").write_text(
        "import torch\n@torch.compile(dynamic=False)\ndef f(x):\n    return x\nfor n in range(3):\n    f(torch.ones(n))\n"
    )
    report = check_corpus.check([str(tmp_path)])
    assert report.files == 2
    assert [os.path.basename(p) for p, _ in report.errors] == ["bad.py"]
    assert report.changed == 1 and report.findings["FR001"] == 1
    assert report.ok
