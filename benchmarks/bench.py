"""Benchmark: fix-recompiles report mode against ruff on the same corpus.

    benchmarks/fetch_corpus.sh /path/to/python      # once: benchmarks/corpus/
    python benchmarks/bench.py [--runs 3] [--jobs 2] [CORPUS]

Pinned ruff: ruff==0.17.6 (``pip install ruff==0.17.6``).

Runs, alternately and ``--runs`` times each (medians reported):
  ruff check --no-cache --select E,F,UP --exit-zero CORPUS
  fix-recompiles --no-cache -jN CORPUS                        (cold)
  fix-recompiles -jN CORPUS, cache already filled, no change  (warm)
then checks that the findings are the same with and without the cache and
with -j1 and -jN.  Peak RSS is that of the largest single process of each
command's tree (the command and its pool workers), measured per command in
a fresh wrapper process (``getrusage(RUSAGE_CHILDREN)``).
Numbers are wall-clock on a shared machine: run it when the machine is quiet.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.path.dirname(sys.executable)


def tool(name: str) -> str:
    path = os.path.join(BIN, name)
    return path if os.path.exists(path) else (shutil.which(name) or name)


#: runs one command and reports its wall time and the peak RSS of the largest
#: single process of its tree (the command and the workers it waited for):
#: a fresh process, so RUSAGE_CHILDREN holds that command only
WRAPPER = (
    "import resource, subprocess, sys, time\n"
    "start = time.perf_counter()\n"
    "code = subprocess.run(sys.argv[1:], stderr=subprocess.DEVNULL).returncode\n"
    "elapsed = time.perf_counter() - start\n"
    "rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
    "sys.stderr.write(f'{elapsed} {rss}\\n')\n"
    "sys.exit(code)\n"
)


def timed(cmd, cwd=None, env=None):
    """(seconds, peak RSS in MB of the largest process, stdout) of one run."""
    proc = subprocess.run([sys.executable, "-c", WRAPPER, *cmd], cwd=cwd, env=env, capture_output=True)
    elapsed, rss_kb = proc.stderr.decode().split()[-2:]
    return float(elapsed), int(rss_kb) / 1024, proc.stdout


def findings(out: bytes):
    return [(d["path"], d["line"], d["column"], d["code"], d["message"]) for d in json.loads(out)]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("corpus", nargs="?", default=os.path.join(HERE, "corpus"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    corpus = os.path.abspath(args.corpus)
    if not os.path.isdir(corpus):
        print(f"no corpus at {corpus}: run benchmarks/fetch_corpus.sh first", file=sys.stderr)
        return 2
    n_files = n_lines = 0
    for dirpath, _dirs, names in os.walk(corpus):
        for name in names:
            if name.endswith(".py"):
                n_files += 1
                with open(os.path.join(dirpath, name), "rb") as fh:
                    n_lines += fh.read().count(b"\n")
    ruff = tool("ruff")
    fr = tool("fix-recompiles")
    version = subprocess.run([ruff, "--version"], capture_output=True, text=True).stdout.strip()
    print(f"corpus: {n_files} files, {n_lines} lines; {version}; -j{args.jobs}; {os.cpu_count()} cores")
    workdir = tempfile.mkdtemp(prefix="fr-bench-")  # the cache lives here, not in the corpus
    env = dict(os.environ)
    ruff_cmd = [ruff, "check", "--no-cache", "--select", "E,F,UP", "--exit-zero", "-q", corpus]
    cold_cmd = [fr, "check", "--no-cache", f"-j{args.jobs}", "--format", "json", corpus]
    warm_cmd = [fr, "check", f"-j{args.jobs}", "--format", "json", corpus]
    times = {"ruff": [], "cold": [], "warm": []}
    rss = {"ruff": 0.0, "cold": 0.0, "warm": 0.0}
    outs = {}
    timed(warm_cmd, cwd=workdir, env=env)  # fill the cache once
    for _ in range(args.runs):
        for name, cmd in (("ruff", ruff_cmd), ("cold", cold_cmd), ("warm", warm_cmd)):
            t, m, out = timed(cmd, cwd=workdir, env=env)
            times[name].append(t)
            rss[name] = max(rss[name], m)
            outs[name] = out
    med = {k: statistics.median(v) for k, v in times.items()}
    for name in ("ruff", "cold", "warm"):
        print(f"{name:5} median {med[name]:6.2f} s  runs {' '.join(f'{t:.2f}' for t in times[name])}  peak RSS {rss[name]:.0f} MB")
    print(f"cold / ruff = {med['cold'] / med['ruff']:.2f}   (goal <= 1.0)")
    print(f"warm / ruff = {med['warm'] / med['ruff']:.2f}   (goal <= 0.3)")
    print(f"peak RSS    = {max(rss['cold'], rss['warm']):.0f} MB (goal <= 500)")
    _t, _m, out_j1 = timed([fr, "check", "--no-cache", "-j1", "--format", "json", corpus], cwd=workdir, env=env)
    same_cache = findings(outs["cold"]) == findings(outs["warm"])
    same_jobs = findings(out_j1) == findings(outs["cold"])
    print(f"findings: {len(findings(outs['cold']))}; same with/without cache: {same_cache}; same -j1/-j{args.jobs}: {same_jobs}")
    shutil.rmtree(workdir, ignore_errors=True)
    return 0 if same_cache and same_jobs else 1


if __name__ == "__main__":
    sys.exit(main())
