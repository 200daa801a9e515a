"""Run a script three ways in one process and report what torch compiled.

    python tests/runtime_probe.py OUT.json SCRIPT [SCRIPT ...]
    python tests/runtime_probe.py --one eager|compiled OUT.json SCRIPT

For each SCRIPT: once with compilation disabled (the eager reference), then
compiled.  ``torch.compile`` is wrapped so that every compile (decorator,
wrapper, ``nn.Module.compile``) uses a counting backend that runs the graph
as captured: graphs compiled and FX nodes compiled are counted.  Between runs
dynamo is reset, its counters cleared and its config restored, so a script
that changes the config (the fixes do) does not leak into the next run.
Output: JSON {"eager": {...}, "<script>": {"graphs": G, "nodes": N, "limit_hits": L, "stdout": S}}
where L counts functions that hit the recompile limit and fell back to eager.
``--one`` makes one run of one script, eager or compiled, and writes its
{"graphs", "nodes", "limit_hits", "stdout"}: the tests run each in its own
fork of a warm process (tests/warm_python.py, tests/golden.py ``probe``).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import runpy
import sys
import warnings

import torch
import torch._dynamo
from torch._dynamo.utils import counters

_real_compile = torch.compile


class Counter:
    def __init__(self) -> None:
        self.graphs = 0
        self.nodes = 0

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        self.nodes += sum(1 for n in gm.graph.nodes if n.op not in ("placeholder", "output"))
        return gm.forward


def _run(script: str, *, compiled: bool) -> dict:
    counter = Counter()

    def counting_compile(model=None, **kwargs):
        kwargs["backend"] = counter
        kwargs.pop("mode", None)
        kwargs.pop("options", None)
        if model is None:
            return _real_compile(**kwargs)
        return _real_compile(model, **kwargs)

    saved_config = torch._dynamo.config.save_config()
    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    torch.compile = counting_compile
    buf = io.StringIO()
    cwd = os.getcwd()
    os.chdir(os.path.dirname(os.path.abspath(script)))
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    before_modules = set(sys.modules)
    try:
        with contextlib.redirect_stdout(buf), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if compiled:
                runpy.run_path(script, run_name="__main__")
            else:
                with torch._dynamo.config.patch(disable=True):
                    runpy.run_path(script, run_name="__main__")
    finally:
        torch.compile = _real_compile
        # 2.13: "Dynamo recompile limit exceeded ..."; 2.9: "recompile_limit reached"
        limit_hits = sum(n for reason, n in counters["unimplemented"].items() if "recompile limit" in reason.lower() or "recompile_limit" in reason.lower())
        os.chdir(cwd)
        sys.path.pop(0)
        # forget modules the script imported from its own folder (cross-module cases)
        for name in set(sys.modules) - before_modules:
            mod = sys.modules.get(name)
            if getattr(mod, "__file__", None) and os.path.dirname(os.path.abspath(mod.__file__)).startswith(os.path.dirname(os.path.abspath(script))):
                del sys.modules[name]
        torch._dynamo.config.load_config(saved_config)
        torch._dynamo.reset()
    return {"graphs": counter.graphs, "nodes": counter.nodes, "limit_hits": limit_hits, "stdout": buf.getvalue()}


def main() -> None:
    if sys.argv[1] == "--one":
        mode, out_path, script = sys.argv[2:5]
        assert mode in ("eager", "compiled"), mode
        with open(out_path, "w") as fh:
            json.dump(_run(script, compiled=mode == "compiled"), fh)
        return
    out_path, scripts = sys.argv[1], sys.argv[2:]
    report = {"eager": _run(scripts[0], compiled=False)}
    for script in scripts:
        report[script] = _run(script, compiled=True)
    with open(out_path, "w") as fh:
        json.dump(report, fh)


if __name__ == "__main__":
    main()
