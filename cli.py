"""``fix-recompiles``: the command line.

    fix-recompiles [check] PATH... [--diff | --fix | -i] [--unsafe-fixes] [--select CODES] [--ignore CODES]
    fix-recompiles rules [CODE]
    fix-recompiles run [--diff | --fix | -i] [--unsafe-fixes] -- CMD ARGS...

Exit codes (ruff's): 0 nothing found (or everything fixed), 1 findings remain
(or ``--diff`` would change something), 2 an error occurred. 2 wins.
"""

from __future__ import annotations

import os
import sys
from typing import List, Optional

import typer

from codemods.context import Settings
from codemods.output import format_finding, statistics, summary, unified_diff_bytes
from codemods.cache import CACHE_DIR, unlink_planted_links
from codemods.formats import FORMATS, to_github, to_json, to_sarif
from codemods.runner import run, run_summary, write_results
from codemods.transforms import BY_CODE, REGISTRY

app = typer.Typer(
    add_completion=False,
    no_args_is_help=False,
    help="Rewrite PyTorch code so torch.compile stops recompiling.",
    context_settings={"help_option_names": ["-h", "--help"]},
)

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def _err(message: str) -> None:
    typer.echo(message, err=True)


def _codes(values: Optional[List[str]], option: str) -> Optional[frozenset]:
    if not values:
        return None
    codes = set()
    for value in values:
        for part in value.split(","):
            part = part.strip().upper()
            if not part:
                continue
            if part != "ALL" and not any(code.startswith(part) for code in BY_CODE):
                _err(f"error: {option}: unknown rule code {part!r} (see `fix-recompiles rules`)")
                raise typer.Exit(EXIT_ERROR)
            codes.add("FR" if part == "ALL" else part)
    return frozenset(codes)


def _read_files_from(source: Optional[str], paths: List[str]) -> List[str]:
    """``--files-from FILE`` / ``-``: more paths, one a line (blank lines skipped)."""
    if source is None:
        return paths
    try:
        if source == "-":
            text = sys.stdin.read()
        else:
            with open(source, encoding="utf-8") as fh:
                text = fh.read()
    except OSError as exc:
        _err(f"error: --files-from: {source}: {exc.strerror or exc}")
        raise typer.Exit(EXIT_ERROR)
    return paths + [line.strip() for line in text.splitlines() if line.strip()]


def _configured(paths, select, ignore, unsafe_fixes, dynamic_fix, target_torch, check_syntax=False):
    """Settings from ``[tool.fix-recompiles]`` overridden by the command line."""
    from codemods.config import ConfigError, config_for, installed_torch, parse_version

    try:
        cfg = config_for(paths)
        target = parse_version(target_torch) if target_torch is not None else (cfg.target_torch or installed_torch())
    except ConfigError as exc:
        _err(f"error: {exc}")
        raise typer.Exit(EXIT_ERROR)
    cfg_select = _codes(list(cfg.select), "select (pyproject.toml)") if cfg.select is not None else None
    cfg_ignore = _codes(list(cfg.ignore), "ignore (pyproject.toml)") if cfg.ignore else None
    for _pattern, codes in cfg.per_file_ignores:
        _codes(list(codes), "per-file-ignores (pyproject.toml)")
    settings = Settings(
        select=_codes(select, "--select") if select else cfg_select,
        ignore=(_codes(ignore, "--ignore") if ignore else cfg_ignore) or frozenset(),
        unsafe_fixes=unsafe_fixes or bool(cfg.unsafe_fixes),
        dynamic_fix=dynamic_fix or cfg.dynamic_fix or "remove",
        target_torch=target,
        check_syntax=check_syntax or bool(cfg.check_syntax),
    )
    return settings, cfg


def _version() -> str:
    try:
        from importlib import metadata

        return metadata.version("fix-recompiles")
    except Exception:  # noqa: BLE001
        return "0"


def _progress():
    """A rich progress bar on stderr (only called when stderr is a terminal)."""
    try:
        from rich.progress import Progress
    except ImportError:  # pragma: no cover
        return None
    state = {}

    def update(done: int, total: int) -> None:
        if total < 200:
            return  # short runs: no bar
        if "bar" not in state:
            bar = Progress(transient=True, console=None)
            bar.start()
            state["bar"], state["task"] = bar, bar.add_task("fix-recompiles", total=total)
        state["bar"].update(state["task"], completed=done)
        if done >= total:
            state["bar"].stop()

    return update


@app.command("check")
def check(
    paths: List[str] = typer.Argument(None, help="Files or folders (default: the current folder)."),
    diff: bool = typer.Option(False, "--diff", help="Print a unified diff of the fixes; write nothing."),
    fix: bool = typer.Option(False, "--fix", help="Apply safe fixes in place."),
    unsafe_fixes: bool = typer.Option(False, "--unsafe-fixes", help="Also apply (or show) unsafe fixes."),
    select: Optional[List[str]] = typer.Option(None, "--select", help="Rule codes or prefixes to enable (comma-separated)."),
    ignore: Optional[List[str]] = typer.Option(None, "--ignore", help="Rule codes or prefixes to disable (comma-separated)."),
    dynamic_fix: Optional[str] = typer.Option(None, "--dynamic-fix", help="How FR001 cures dynamic=False: 'remove' (default) it or write 'true'."),
    show_statistics: bool = typer.Option(False, "--statistics", help="Print the number of findings per rule."),
    output_format: str = typer.Option("text", "--format", help="Output: text, json, sarif or github (workflow annotations)."),
    jobs: Optional[int] = typer.Option(None, "-j", "--jobs", help="Worker processes (default: all cores)."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Neither read nor write the result cache (.fix_recompiles_cache/)."),
    force_exclude: bool = typer.Option(False, "--force-exclude", help="Apply excludes to files named on the command line too (pre-commit)."),
    files_from: Optional[str] = typer.Option(None, "--files-from", metavar="FILE", help="Read paths, one a line, from FILE ('-': stdin)."),
    target_torch: Optional[str] = typer.Option(None, "--target-torch", metavar="VERSION", help="The torch release fixed code must run on (default: the installed one)."),
    check_syntax: bool = typer.Option(False, "--check-syntax", help="Also parse files no rule applies to, so a syntax error anywhere is reported (slower)."),
    interactive: bool = typer.Option(False, "-i", "--interactive", help="Review every fix, one at a time (like `git add -p`); write the accepted ones."),
    from_trace: Optional[str] = typer.Option(None, "--from-trace", metavar="DIR", help="A TORCH_TRACE folder: report its recompiles and diff, fix or (-i) review only the findings they implicate."),
) -> None:
    """Report (default), diff or fix recompile causes in PATHs."""
    if diff and fix:
        _err("error: --diff and --fix are exclusive (--diff writes nothing)")
        raise typer.Exit(EXIT_ERROR)
    if interactive and (diff or fix):
        _err("error: --interactive is exclusive with --diff and --fix")
        raise typer.Exit(EXIT_ERROR)
    if interactive and not sys.stdin.isatty():
        _err("error: --interactive needs a terminal on stdin; use --diff to preview the fixes or --fix to apply them")
        raise typer.Exit(EXIT_ERROR)
    if dynamic_fix not in (None, "remove", "true"):
        _err(f"error: --dynamic-fix must be 'remove' or 'true', not {dynamic_fix!r}")
        raise typer.Exit(EXIT_ERROR)
    if output_format not in FORMATS:
        _err(f"error: --format must be one of {', '.join(FORMATS)}, not {output_format!r}")
        raise typer.Exit(EXIT_ERROR)
    paths = _read_files_from(files_from, list(paths or []))
    if files_from is not None and not paths:
        _err("All checks passed!" if output_format == "text" else "")
        raise typer.Exit(EXIT_CLEAN)
    settings, cfg = _configured(paths or ["."], select, ignore, unsafe_fixes, dynamic_fix, target_torch, check_syntax)
    unsafe_fixes = settings.unsafe_fixes
    if from_trace is not None:
        from codemods import trace_run

        raise typer.Exit(trace_run.from_trace(from_trace, paths or ["."], settings, diff=diff, fix=fix, interactive=interactive))
    if interactive:
        from codemods.interactive import run_interactive

        raise typer.Exit(run_interactive(paths or ["."], settings, sys.stdin, sys.stdout, sys.stderr))
    from codemods.config import PerFileIgnores

    cache_dir = None if no_cache or os.environ.get("FIX_RECOMPILES_NO_CACHE", "") not in ("", "0") else (os.environ.get("FIX_RECOMPILES_CACHE_DIR") or os.path.join(cfg.root, CACHE_DIR))
    if cache_dir is not None and not diff:
        unlink_planted_links(cache_dir)  # the cache never writes through a link
    result = run(
        paths or ["."],
        settings,
        jobs=jobs if jobs is not None else (os.cpu_count() or 1),
        cache_dir=cache_dir,
        cache_write=not diff,  # --diff writes nothing, not even the cache
        config_excludes=cfg.excludes,
        config_root=cfg.root,
        force_exclude=force_exclude,
        per_file_ignores=PerFileIgnores(cfg.per_file_ignores, cfg.root) if cfg.per_file_ignores else None,
        progress=_progress() if sys.stderr.isatty() else None,
    )
    for path, reason in result.errors:
        _err(f"error: {path}: {reason}")
    errors_before_write = len(result.errors)

    findings = result.findings
    if diff:
        # the patch is made of the files' own bytes (encoding, BOM, CRLF kept)
        sys.stdout.flush()
        out = getattr(sys.stdout, "buffer", None)
        for r in result.results:
            if r.changed:
                patch = unified_diff_bytes(r.display_path, r.original, r.new)  # type: ignore[arg-type]
                if out is not None:
                    out.write(patch)
                else:  # a text-only stdout (embedding): best effort
                    sys.stdout.write(patch.decode(r.encoding, "replace"))
        if out is not None:
            out.flush()
        sys.stdout.flush()
        n_changed = sum(1 for r in result.results if r.changed)
        n_fixes = sum(1 for f in findings if f.applied)
        if n_changed:
            _err(f"Would fix {n_fixes} finding{'s' if n_fixes != 1 else ''} in {n_changed} file{'s' if n_changed != 1 else ''}.")
        for line in summary(findings, fixed=0, errors=len(result.errors), files_changed=0, fixing=False, unsafe_fixes=unsafe_fixes):
            if not line.startswith(("Found ", "All checks passed!")):  # "Would fix" says it
                _err(line)
        code = EXIT_FINDINGS if n_changed else EXIT_CLEAN
    else:
        written = write_results(result) if fix else 0
        for path, reason in result.errors[errors_before_write:]:
            _err(f"error: {path}: {reason}")
        fixed = sum(1 for f in findings if f.applied) if fix else 0
        machine = output_format != "text"
        if output_format == "json":
            sys.stdout.write(to_json(result.results))
        elif output_format == "sarif":
            sys.stdout.write(to_sarif(result.results, [r for r in REGISTRY if settings.selects(r.code)], _version()))
        elif output_format == "github":
            sys.stdout.write(to_github([f for f in findings if not (fix and f.applied)]))
        for f in findings if not machine else ():
            if fix and f.applied:
                continue
            typer.echo(format_finding(f))
        if show_statistics:
            for line in statistics(findings) + run_summary(result.stats):
                typer.echo(line, err=machine)
        for line in summary(findings, fixed=fixed, errors=len(result.errors), files_changed=written, fixing=fix, unsafe_fixes=unsafe_fixes):
            typer.echo(line, err=machine)
        if sys.stderr.isatty() and not show_statistics:
            for line in run_summary(result.stats):
                _err(line)
        remaining = len(findings) - fixed
        code = EXIT_FINDINGS if remaining else EXIT_CLEAN
    if result.errors:
        code = EXIT_ERROR
    raise typer.Exit(code)


@app.command("rules")
def rules(code: Optional[str] = typer.Argument(None, help="A rule code, e.g. FR001, or a rule name.")) -> None:
    """List the rules, or explain one."""
    if code is None:
        for rule in REGISTRY:
            typer.echo(f"{rule.code}  {rule.name:<20} {rule.summary}")
        return
    from codemods.transforms import BY_NAME

    rule = BY_CODE.get(code.upper()) or BY_NAME.get(code)
    if rule is None:
        _err(f"error: unknown rule {code!r} (see `fix-recompiles rules`)")
        raise typer.Exit(EXIT_ERROR)
    typer.echo(rule.doc(), nl=False)


@app.command("run", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def run_cmd(
    ctx: typer.Context,
    diff: bool = typer.Option(False, "--diff", help="Print a diff of the fixes the trace implicates; write nothing."),
    fix: bool = typer.Option(False, "--fix", help="Apply them, run CMD again and compare graphs compiled."),
    interactive: bool = typer.Option(False, "-i", "--interactive", help="Review the fixes the trace implicates one at a time, write the accepted ones, run CMD again and compare."),
    unsafe_fixes: bool = typer.Option(False, "--unsafe-fixes", help="Also apply implicated fixes that stay unsafe."),
    select: Optional[List[str]] = typer.Option(None, "--select", help="Rule codes or prefixes to enable (comma-separated)."),
    ignore: Optional[List[str]] = typer.Option(None, "--ignore", help="Rule codes or prefixes to disable (comma-separated)."),
    dynamic_fix: str = typer.Option("remove", "--dynamic-fix", help="How FR001 cures dynamic=False: 'remove' it or write 'true'."),
) -> None:
    """Run `-- CMD ARGS...` under TORCH_TRACE, explain its recompiles, fix their causes."""
    if diff and fix:
        _err("error: --diff and --fix are exclusive (--diff writes nothing)")
        raise typer.Exit(EXIT_ERROR)
    if interactive and (diff or fix):
        _err("error: --interactive is exclusive with --diff and --fix")
        raise typer.Exit(EXIT_ERROR)
    if interactive and not sys.stdin.isatty():
        _err("error: --interactive needs a terminal on stdin; use --diff to preview the fixes or --fix to apply them")
        raise typer.Exit(EXIT_ERROR)
    if dynamic_fix not in ("remove", "true"):
        _err(f"error: --dynamic-fix must be 'remove' or 'true', not {dynamic_fix!r}")
        raise typer.Exit(EXIT_ERROR)
    settings = Settings(
        select=_codes(select, "--select"),
        ignore=_codes(ignore, "--ignore") or frozenset(),
        unsafe_fixes=unsafe_fixes,
        dynamic_fix=dynamic_fix,
    )
    from codemods import trace_run

    raise typer.Exit(trace_run.run(list(ctx.args), settings, diff=diff, fix=fix, interactive=interactive))


COMMANDS = ("check", "rules", "run")


def main(argv: Optional[List[str]] = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if args in (["--version"], ["-V"]):
        typer.echo(f"fix-recompiles {_version()}")
        return
    if not args or (args[0] not in COMMANDS and args[0] not in ("-h", "--help")):
        args.insert(0, "check")
    app(args=args, prog_name="fix-recompiles")


if __name__ == "__main__":
    main()
