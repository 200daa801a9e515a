"""Benchmark: fix-recompiles report mode against ruff, on two corpora.

    benchmarks/fetch_corpus.sh python                 # once: benchmarks/corpus/
    MIRRORS=/work/.mirror benchmarks/fetch_training.sh  # once: benchmarks/training/
    python benchmarks/bench.py [--runs 3] [--jobs 2] [--quick]
                               [--only library|training] [--repos nanochat,gpt-fast]

Pinned ruff: ruff==0.17.6 (``pip install ruff==0.17.6``).  The engine measured
is the one of the checkout holding this script (``PYTHONPATH``), whatever the
venv's editable install points at.

For each corpus (the library corpus ``benchmarks/corpus`` and the training
corpus ``benchmarks/training``; a missing one is skipped with a message):

1. runs, alternately and ``--runs`` times each (medians reported):
     ruff check --no-cache --select E,F,UP --exit-zero CORPUS
     fix-recompiles --no-cache -jN CORPUS                        (cold)
     fix-recompiles -jN CORPUS, cache already filled, no change  (warm: the
                                      replay of the recorded run, codemods/replay.py)
     the same after one file's mtime moved (touched: the per-file cache)
   and checks that the findings are the same with and without the cache and
   with -j1 and -jN.  Peak RSS is that of the largest single process of each
   command's tree (the command and its pool workers), measured per command in
   a fresh wrapper process (``getrusage(RUSAGE_CHILDREN)``);
2. times every file in this process with ``codemods.pipeline.engine.process_file``
   (default ``Settings()``, no project index: cross-file facts are left out),
   after a warm-up that imports and exercises every pass, and lists the five
   slowest files (a file under the lines/s goal is timed twice more and
   keeps its best time: sub-millisecond timings of tiny files are noisy).

With the commands, it prints the **floor** of a cold run on that corpus: the
start-up (``fix-recompiles --version``), discovery, reading every file with
the byte prefilter, and the stdlib parse of the files that can hold a compile
site (``mentions_compile``; parsed and freed as a run does, collector set as
a run sets it), the parallel part divided by ``--jobs`` as if perfectly
shared, and *no analysis at all*.  What the analysis costs comes on top: a
goal below the floor cannot be met by any analysis on the stdlib ``ast``.

Then it times the stress input (``benchmarks/stress_input.py``: a generated
~2,500-line training script dense with compile sites) with ``process_file``,
best of ``--runs``.

In-process times are CPU seconds of this process (``time.process_time``),
wall-clock alongside: the CPU time is what the engine costs, the wall clock
also holds what other jobs on the machine took.  lines/s is computed from the
CPU time.  Command times are wall-clock.  Numbers are from a shared machine:
run it when the machine is quiet, and quote the load (``uptime``).

Goals (``GOALS`` below): cold <= 1.0x ruff on the training repos and <= 0.5x on
the library corpus, warm <= 0.1x ruff, peak RSS <= 200 MB, every file analysed
at >= 20k lines/s, the stress input in < 0.15 s.
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
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.path.dirname(sys.executable)
#: the checkout this script belongs to: its engine is the one measured (the
#: venv's editable install may point at another worktree), in this process
#: and in every command (PYTHONPATH)
ROOT = os.path.dirname(HERE)
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
sys.path[:0] = [ROOT, HERE]  # codemods and cli of this checkout; stress_input

#: goals per corpus kind: cold and warm as ratios to ruff, peak RSS in MB
GOALS = {
    "library": {"cold": 0.5, "warm": 0.1, "rss": 200.0},
    "training": {"cold": 1.0, "warm": 0.1, "rss": 200.0},
}
SLOW_LINES_PER_S = 20_000  # files analysed slower than this are flagged
STRESS_GOAL_S = 0.15
#: folders no tool looks into (hidden folders are skipped too)
SKIP_DIRS = {"__pycache__", "build", "dist", "venv", "node_modules", "site-packages"}


def tool(name: str) -> str:
    path = os.path.join(BIN, name)
    return path if os.path.exists(path) else (shutil.which(name) or name)


# ----------------------------------------------------------------- commands

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


def timed(cmd, cwd=None):
    """(seconds, peak RSS in MB of the largest process, stdout) of one run."""
    proc = subprocess.run([sys.executable, "-c", WRAPPER, *cmd], check=False, cwd=cwd, env=ENV, capture_output=True)
    elapsed, rss_kb = proc.stderr.decode().split()[-2:]
    return float(elapsed), int(rss_kb) / 1024, proc.stdout


def findings(out: bytes):
    return [(d["path"], d["line"], d["column"], d["code"], d["message"]) for d in json.loads(out)]


def python_files(paths):
    for root in paths:
        for dirpath, dirs, names in os.walk(root):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIP_DIRS)
            for name in sorted(names):
                if name.endswith(".py"):
                    yield os.path.join(dirpath, name)


def count_lines(path: str) -> int:
    """Lines of a file, a last line without its newline included (an empty
    file has none)."""
    with open(path, "rb") as fh:
        data = fh.read()
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def run_commands(paths, runs: int, jobs: int):
    """Medians, runs, peak RSS and findings of ruff, cold and warm; consistency checks."""
    ruff, fr = tool("ruff"), tool("fix-recompiles")
    workdir = tempfile.mkdtemp(prefix="fr-bench-")  # the cache lives here, not in the corpus
    try:
        cmds = {
            "ruff": [ruff, "check", "--no-cache", "--select", "E,F,UP", "--exit-zero", "-q", *paths],
            "cold": [fr, "check", "--no-cache", f"-j{jobs}", "--format", "json", *paths],
            "warm": [fr, "check", f"-j{jobs}", "--format", "json", *paths],
        }
        # "touched": warm, after one file's mtime moved (an editor's save):
        # the replay of the unchanged run misses, the per-file cache answers
        cmds["touched"] = cmds["warm"]
        touched = next(python_files(paths), None)
        st = os.stat(touched) if touched is not None else None
        times = {name: [] for name in cmds}
        rss = {name: 0.0 for name in cmds}
        outs = {}
        timed(cmds["warm"], cwd=workdir)  # fill the cache once
        time.sleep(2.1)  # the replay records no run that read a file modified in the last 2 s
        timed(cmds["warm"], cwd=workdir)  # and record the run for its replay
        try:
            for _ in range(runs):
                for name, cmd in cmds.items():
                    if name == "touched" and touched is not None:
                        os.utime(touched, ns=(st.st_atime_ns, time.time_ns()))
                    t, m, out = timed(cmd, cwd=workdir)
                    if name == "touched" and touched is not None:
                        os.utime(touched, ns=(st.st_atime_ns, st.st_mtime_ns))
                    times[name].append(t)
                    rss[name] = max(rss[name], m)
                    outs[name] = out
        finally:
            if touched is not None:
                os.utime(touched, ns=(st.st_atime_ns, st.st_mtime_ns))
        _t, _m, out_j1 = timed([fr, "check", "--no-cache", "-j1", "--format", "json", *paths], cwd=workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    cold = findings(outs["cold"])
    return {
        "counts": {"ruff": "", "cold": len(cold), "warm": len(findings(outs["warm"])), "touched": len(findings(outs["touched"]))},
        "median": {k: statistics.median(v) for k, v in times.items()},
        "times": times,
        "rss": rss,
        "findings": len(cold),
        "same_cache": cold == findings(outs["warm"]) == findings(outs["touched"]),
        "same_jobs": cold == findings(out_j1),
    }


def floor(paths, jobs: int, startup: float) -> dict:
    """What a cold run costs before any analysis (best of 3 in this process):
    see the module docstring."""
    from codemods.pipeline.discovery import discover
    from codemods.analysis.mentions import mentions_compile
    from codemods.pipeline.runner import _quiet_collector
    from codemods.analysis.source import decode, parse

    best = None
    with _quiet_collector():
        for _ in range(3):
            t0 = time.process_time()
            files = discover(paths, ()).files
            t1 = time.process_time()
            candidates = []
            for path in files:
                with open(path, "rb") as fh:
                    data = fh.read()
                if mentions_compile(data):
                    candidates.append(data)
            t2 = time.process_time()
            lines = 0
            for data in candidates:
                try:
                    text, _encoding = decode(data)
                    tree = parse(text, data)
                except (SyntaxError, ValueError, RecursionError, UnicodeDecodeError, LookupError):
                    continue
                lines += data.count(b"\n")
                del tree  # freed here, as a run frees each file's tree
            t3 = time.process_time()
            times = (t1 - t0, t2 - t1, t3 - t2)
            if best is None or sum(times) < sum(best[0]):
                best = (times, len(files), len(candidates), lines)
    (discovery, reading, parsing), n_files, n_parsed, lines = best
    return {
        "wall": startup + discovery + (reading + parsing) / jobs,
        "startup": startup,
        "discovery": discovery,
        "reading": reading,
        "parsing": parsing,
        "files": n_files,
        "parsed": n_parsed,
        "lines": lines,
    }


# --------------------------------------------------------------- in-process


def load_engine():
    """process_file and Settings, imported and warmed up on a small stress input."""
    import stress_input

    from codemods.analysis.context import Settings
    from codemods.pipeline.engine import process_file

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "warmup.py")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(stress_input.generate(lines=300))
        process_file(path, "warmup.py", Settings())
    return process_file, Settings


def time_file(process_file, settings, path: str, display: str):
    """(CPU seconds, wall seconds, result) of one in-process analysis."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = process_file(path, display, settings, render_fixes=False)  # report mode, as the CLI's report
    return time.process_time() - cpu, time.perf_counter() - wall, result


def time_files(engine, paths, base: str):
    """Per file: (display path, lines, CPU s, wall s, error), with the cyclic
    collector set as a run sets it (``runner._quiet_collector``: at the
    default threshold a collection lands on whichever file is being timed)."""
    from codemods.pipeline.runner import _quiet_collector

    process_file, Settings = engine
    settings = Settings()
    rows = []
    with _quiet_collector():
        for path in python_files(paths):
            display = os.path.relpath(path, base)
            cpu, wall, result = time_file(process_file, settings, path, display)
            lines = count_lines(path)
            # a file under the rate is timed twice more and keeps its best:
            # a tiny file's fraction of a millisecond can be one scheduler
            # hiccup (a 1-line __init__.py once read 0.2 ms: 5,866 lines/s)
            for _ in range(2):
                if not lines or lines_per_s(lines, cpu) >= SLOW_LINES_PER_S:
                    break
                again, again_wall, result = time_file(process_file, settings, path, display)
                if again < cpu:
                    cpu, wall = again, again_wall
            rows.append((display, lines, cpu, wall, result.error))
    return rows


def time_stress(engine, runs: int):
    """(best CPU s, wall s of that run, lines, findings) of the stress input."""
    import stress_input

    process_file, Settings = engine
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "stress.py")
        source = stress_input.generate()
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(source)
        from codemods.pipeline.runner import _quiet_collector

        best = None
        with _quiet_collector():  # as a run has it (see time_files)
            for _ in range(runs):
                cpu, wall, result = time_file(process_file, Settings(), path, "stress.py")
                if best is None or cpu < best[0]:
                    best = (cpu, wall, len(result.findings))
    return best[0], best[1], source.count("\n"), best[2]


# ------------------------------------------------------------------ reports


def met(value: float, goal: float) -> str:
    return "met" if value <= goal else "NOT met"


def lines_per_s(lines: int, cpu: float) -> float:
    return lines / cpu if cpu > 0 else float("inf")


def report_corpus(kind: str, label: str, paths, base: str, args, engine) -> dict:
    files = list(python_files(paths))
    n_lines = sum(count_lines(p) for p in files)
    print(f"\n## {label}: {len(files)} files, {n_lines} lines")
    start = time.perf_counter()
    summary = {"label": label}
    if not args.in_process_only:
        summary.update(report_commands(kind, paths, args))
    if engine is not None:
        summary.update(report_files(engine, paths, base, args.top))
    print(f"\n({label}: {time.perf_counter() - start:.0f} s of benchmarking)")
    return summary


def report_commands(kind: str, paths, args) -> dict:
    r = run_commands(paths, args.runs, args.jobs)
    low = floor(paths, args.jobs, args.startup)
    med, rss, goals = r["median"], r["rss"], GOALS[kind]
    cold_ratio, warm_ratio = med["cold"] / med["ruff"], med["warm"] / med["ruff"]
    peak = max(rss["cold"], rss["warm"])
    print()
    print("| run | median wall | runs | ratio to ruff | goal | peak RSS | findings |")
    print("| --- | --- | --- | --- | --- | --- | --- |")

    def row(name, title, ratio, goal):
        runs = " ".join(f"{t:.2f}" for t in r["times"][name])
        print(f"| {title} | {med[name]:.2f} s | {runs} | {ratio} | {goal} | {rss[name]:.0f} MB | {r['counts'][name]} |")

    row("ruff", "`ruff check --no-cache --select E,F,UP`", "1.00", "")
    row("cold", f"fix-recompiles cold (`--no-cache -j{args.jobs}`)", f"{cold_ratio:.2f}", f"<= {goals['cold']}: {met(cold_ratio, goals['cold'])}")
    row("warm", "fix-recompiles warm (cache filled, no change: replayed)", f"{warm_ratio:.2f}", f"<= {goals['warm']}: {met(warm_ratio, goals['warm'])}")
    row("touched", "fix-recompiles warm, one file's mtime moved (per-file cache)", f"{med['touched'] / med['ruff']:.2f}", "")
    print()
    print(f"peak RSS (fix-recompiles, largest process): {peak:.0f} MB (goal <= {goals['rss']:.0f}: {met(peak, goals['rss'])})")
    print(f"findings: {r['findings']}; same with/without cache: {r['same_cache']}; same -j1/-j{args.jobs}: {r['same_jobs']}")
    floor_ratio = low["wall"] / med["ruff"]
    print(
        f"floor of a cold run (no analysis): {low['wall']:.2f} s = {floor_ratio:.2f}x ruff: start-up {low['startup']:.2f} s + discovery "
        f"{low['discovery']:.2f} s + (reading {low['files']} files {low['reading']:.2f} s + stdlib parse of the {low['parsed']} that can hold "
        f"a compile site, {low['lines']:,} lines, {low['parsing']:.2f} s) / {args.jobs} jobs; the analysis comes on top"
    )
    return {
        "floor": (floor_ratio, goals["cold"]),
        "cold": (cold_ratio, goals["cold"]),
        "warm": (warm_ratio, goals["warm"]),
        "rss": (peak, goals["rss"]),
        "consistent": r["same_cache"] and r["same_jobs"],
    }


def report_files(engine, paths, base: str, top: int) -> dict:
    """Times every file in this process; prints totals and the ``top`` slowest."""
    rows = time_files(engine, paths, base)
    total_cpu = sum(row[2] for row in rows)
    total_lines = sum(row[1] for row in rows)
    # an empty file has no rate (0 lines in any time): counted apart, not as slow
    empty = [row for row in rows if row[1] == 0]
    slow = [row for row in rows if row[1] > 0 and lines_per_s(row[1], row[2]) < SLOW_LINES_PER_S]
    errors = [row for row in rows if row[4]]
    print(
        f"\nin-process, one file at a time: {total_cpu:.2f} s CPU ({sum(row[3] for row in rows):.2f} s wall), "
        f"{lines_per_s(total_lines, total_cpu):,.0f} lines/s; {len(slow)} files under {SLOW_LINES_PER_S:,} lines/s "
        f"({sum(row[2] for row in slow):.2f} s CPU); {len(empty)} empty files (no rate, {sum(row[2] for row in empty):.3f} s CPU); "
        f"{len(errors)} files with an error"
    )
    if slow:
        print("\n| files under the rate | lines | CPU s | lines/s |")
        print("| --- | --- | --- | --- |")
        for display, lines, cpu, _wall, _error in sorted(slow, key=lambda row: lines_per_s(row[1], row[2]))[:top]:
            print(f"| {display} | {lines} | {cpu:.4f} | {lines_per_s(lines, cpu):,.0f} |")
    print("\n| slowest files | lines | CPU s | wall s | lines/s | |")
    print("| --- | --- | --- | --- | --- | --- |")
    for display, lines, cpu, wall, error in sorted(rows, key=lambda row: -row[2])[:top]:
        lps = lines_per_s(lines, cpu)
        flag = "SLOW" if lines and lps < SLOW_LINES_PER_S else ""
        if error:
            flag = (flag + " error: " + error).strip()
        print(f"| {display} | {lines} | {cpu:.3f} | {wall:.3f} | {lps:,.0f} | {flag} |")
    return {"slow_files": len(slow)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default=os.path.join(HERE, "corpus"), help="library corpus (default: benchmarks/corpus)")
    parser.add_argument("--training", default=os.path.join(HERE, "training"), help="training corpus (default: benchmarks/training)")
    parser.add_argument("--repos", help="only these training repos (comma-separated folder names)")
    parser.add_argument("--only", choices=("library", "training"), help="benchmark one corpus only")
    parser.add_argument("--runs", type=int, default=3, help="runs of each command, and of the stress input (default 3)")
    parser.add_argument("--jobs", type=int, default=2, help="-j for the cold and warm runs (default 2)")
    parser.add_argument("--quick", action="store_true", help="one run each (for development)")
    parser.add_argument("--top", type=int, default=5, help="how many of the slowest files to list (default 5)")
    parser.add_argument("--in-process-only", action="store_true", help="no commands: only the per-file and stress timings")
    args = parser.parse_args()
    if args.quick:
        args.runs = 1

    ruff_version = subprocess.run([tool("ruff"), "--version"], check=False, capture_output=True, text=True).stdout.strip()
    print(f"# fix-recompiles benchmark: {ruff_version}; -j{args.jobs}; {args.runs} run(s) each; {os.cpu_count()} cores")
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")

    # byte-compile the checkout as `pip install` does (an installed package
    # never compiles its sources at start-up; PYTHONDONTWRITEBYTECODE, set on
    # some machines, would otherwise make every run compile them: ~30% of
    # the start-up measured)
    subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.join(ROOT, "cli.py"), os.path.join(ROOT, "codemods")], check=False, capture_output=True)
    ENV.pop("PYTHONDONTWRITEBYTECODE", None)
    where = subprocess.run([sys.executable, "-c", "import codemods; print(codemods.__file__)"], check=False, env=ENV, capture_output=True, text=True)
    print(f"engine measured: {os.path.dirname(where.stdout.strip()) or where.stderr.strip()[-200:]}")
    startup = [] if args.in_process_only else [timed([tool("fix-recompiles"), "--version"])[0] for _ in range(args.runs)]
    args.startup = statistics.median(startup) if startup else 0.0
    if startup:
        print(f"start-up (`fix-recompiles --version`): median {args.startup:.2f} s")
    try:
        engine = load_engine()
    except Exception as exc:  # noqa: BLE001 - the engine is being rewritten: report, go on
        print(f"in-process timing unavailable: cannot import or run codemods.pipeline.engine.process_file ({type(exc).__name__}: {exc})")
        engine = None

    corpora = []
    if args.only in (None, "library"):
        corpus = os.path.abspath(args.corpus)
        if os.path.isdir(corpus):
            corpora.append(("library", f"library corpus ({corpus})", [corpus], corpus))
        else:
            print(f"\nlibrary corpus skipped: no {corpus} (run benchmarks/fetch_corpus.sh first)")
    if args.only in (None, "training"):
        training = os.path.abspath(args.training)
        if args.repos:
            names = [n.strip() for n in args.repos.split(",") if n.strip()]
        else:
            names = sorted(n for n in os.listdir(training) if not n.startswith(".")) if os.path.isdir(training) else []
        repos = [os.path.join(training, n) for n in names if os.path.isdir(os.path.join(training, n))]
        if missing := [n for n in names if not os.path.isdir(os.path.join(training, n))]:
            print(f"\ntraining repos not found, left out: {', '.join(missing)}")
        if repos:
            found = ", ".join(os.path.basename(r) for r in repos)
            corpora.append(("training", f"training corpus ({training}: {found})", repos, training))
        else:
            print(f"\ntraining corpus skipped: no repos under {training} (run benchmarks/fetch_training.sh first)")

    summaries = [report_corpus(kind, label, paths, base, args, engine) for kind, label, paths, base in corpora]

    stress = None
    if engine is not None:
        cpu, wall, lines, n = time_stress(engine, args.runs)
        stress = f"stress input {cpu:.3f} s CPU (< {STRESS_GOAL_S} s: {'met' if cpu < STRESS_GOAL_S else 'NOT met'})"
        print(
            f"\n## stress input: {lines} lines, {n} findings: best of {args.runs}: {cpu:.3f} s CPU ({wall:.3f} s wall), "
            f"{lines_per_s(lines, cpu):,.0f} lines/s (goal < {STRESS_GOAL_S} s: {'met' if cpu < STRESS_GOAL_S else 'NOT met'})"
        )

    print("\n## goals")
    for s in summaries:
        parts = []
        if "cold" in s:
            parts.append(f"cold {s['cold'][0]:.2f}x ruff (<= {s['cold'][1]}: {met(*s['cold'])}; floor with no analysis {s['floor'][0]:.2f}x)")
            parts.append(f"warm {s['warm'][0]:.2f}x (<= {s['warm'][1]}: {met(*s['warm'])})")
            parts.append(f"RSS {s['rss'][0]:.0f} MB (<= {s['rss'][1]:.0f}: {met(*s['rss'])})")
        if "slow_files" in s:
            parts.append(f"{s['slow_files']} files < {SLOW_LINES_PER_S:,} lines/s")
        print(f"- {s['label']}: " + "; ".join(parts))
    if stress:
        print(f"- {stress}")
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0 if all(s.get("consistent", True) for s in summaries) else 1


if __name__ == "__main__":
    sys.exit(main())
