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

# The engine, imported by name so that an IDE, a type checker or an import
# graph can follow the command line into it.  Installed, this module is
# ``fix_recompiles.cli`` beside ``fix_recompiles.codemods`` (pyproject.toml
# maps the layout into one package of our own); in a checkout it is the
# top-level ``cli`` beside ``codemods/``.  Nothing named ``codemods`` is ever
# aliased in ``sys.modules``: another package of that name may be imported in
# the same process.
if __package__:
    from .codemods import transforms
    from .codemods.analysis.context import Settings
    from .codemods.modes import formats, guard, output, traced
    from .codemods.modes import interactive as interactive_mode
    from .codemods.pipeline import cache, config, discovery, engine, replay, runner, selection
    from .codemods.trace import registry as trace_registry
else:
    from codemods import transforms
    from codemods.analysis.context import Settings
    from codemods.modes import formats, guard, output, traced
    from codemods.modes import interactive as interactive_mode
    from codemods.pipeline import cache, config, discovery, engine, replay, runner, selection
    from codemods.trace import registry as trace_registry

BY_CODE, REGISTRY = transforms.BY_CODE, transforms.REGISTRY
FORMATS = formats.FORMATS
EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = output.EXIT_CLEAN, output.EXIT_FINDINGS, output.EXIT_ERROR


app = typer.Typer(
    add_completion=False,
    no_args_is_help=False,
    help="Rewrite PyTorch code so torch.compile stops recompiling.",
    context_settings={"help_option_names": ["-h", "--help"]},
    # click's plain help, like ruff's: flags without a type placeholder, value
    # options with their metavar (CODES, N, FILE ...)
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)



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
            if part != "ALL" and not any(code.startswith(part) for code in (*BY_CODE, trace_registry.CODE)):
                _err(f"error: {option}: unknown rule code {part!r} (see `fix-recompiles rules`)")
                raise typer.Exit(EXIT_ERROR)
            codes.update(("FR", trace_registry.CODE) if part == "ALL" else (part,))
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


def resolve_settings(
    paths: List[str],
    *,
    config_file: Optional[str] = None,
    select: Optional[List[str]] = None,
    ignore: Optional[List[str]] = None,
    unsafe_fixes: bool = False,
    dynamic_fix: Optional[str] = None,
    target_torch: Optional[str] = None,
    check_syntax: bool = False,
    unproven: bool = False,
):
    """The one place settings are resolved, for every command (``check``,
    ``run``, stdin): ``[tool.fix-recompiles]`` from ``--config FILE`` or the
    closest ``pyproject.toml`` up from the first path, overridden by the
    command line.  Returns (Settings, Config); a bad value is one line, exit 2."""
    if dynamic_fix not in (None, "remove", "true"):
        _err(f"error: --dynamic-fix must be 'remove' or 'true', not {dynamic_fix!r}")
        raise typer.Exit(EXIT_ERROR)
    try:
        cfg = config.config_for(paths, config_file)
        target = config.parse_version(target_torch) if target_torch is not None else (cfg.target_torch or config.installed_torch())
    except config.ConfigError as exc:
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
        unproven=unproven or bool(cfg.unproven),
    )
    return settings, cfg


def file_selection(cfg, cli_excludes: Optional[tuple], force_exclude: bool = False):
    """The files every mode of this run takes, from the configuration and the
    command line (``--exclude`` replaces the configuration's ``exclude`` and
    keeps its ``extend-exclude``), with its ``per-file-ignores``."""
    checks = [("--exclude", cli_excludes or ()), ("exclude (pyproject.toml)", cfg.exclude), ("extend-exclude (pyproject.toml)", cfg.extend_exclude),
              ("per-file-ignores (pyproject.toml)", [pattern for pattern, _codes in cfg.per_file_ignores])]
    for origin, patterns in checks:
        why = selection.pattern_error(patterns)
        if why is not None:
            _err(f"error: {origin}: {why}")
            raise typer.Exit(EXIT_ERROR)
    return selection.FileSelection(
        excludes=cli_excludes or (),
        config_excludes=cfg.excludes if cli_excludes is None else cfg.extend_exclude,
        config_root=cfg.root,
        force_exclude=force_exclude,
        per_file_ignores=config.PerFileIgnores(cfg.per_file_ignores, cfg.root) if cfg.per_file_ignores else None,
    )


def _patterns(values: Optional[List[str]]) -> Optional[tuple]:
    """``--exclude a,b --exclude c`` -> ("a", "b", "c"); None when not given."""
    if not values:
        return None
    return tuple(p.strip() for v in values for p in v.split(",") if p.strip())


def _version() -> str:
    return config.dist_version("fix-recompiles") or "0"


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
    paths: List[str] = typer.Argument(None, metavar="PATH", show_default=False, hidden=True),
    diff: bool = typer.Option(False, "--diff", help="Print a unified diff of the fixes; write nothing."),
    fix: bool = typer.Option(False, "--fix", help="Apply safe fixes in place."),
    unsafe_fixes: bool = typer.Option(False, "--unsafe-fixes", help="Also apply (or show) unsafe fixes."),
    select: Optional[List[str]] = typer.Option(None, "--select", metavar="CODES", help="Rule codes or prefixes to enable (comma-separated)."),
    ignore: Optional[List[str]] = typer.Option(None, "--ignore", metavar="CODES", help="Rule codes or prefixes to disable (comma-separated)."),
    dynamic_fix: Optional[str] = typer.Option(None, "--dynamic-fix", metavar="remove|true", help="How FR001 cures dynamic=False: 'remove' (default) it or write 'true'."),
    show_statistics: bool = typer.Option(False, "--statistics", help="Print the number of findings per rule."),
    output_format: str = typer.Option("text", "--format", metavar="FORMAT", help="Output: text, json, sarif or github (workflow annotations)."),
    jobs: Optional[int] = typer.Option(None, "-j", "--jobs", metavar="N", help="Worker processes (default: all cores)."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Neither read nor write the result cache (.fix_recompiles_cache/)."),
    force_exclude: bool = typer.Option(False, "--force-exclude", help="Apply excludes to files named on the command line too (pre-commit)."),
    files_from: Optional[str] = typer.Option(None, "--files-from", metavar="FILE", help="Read paths, one a line, from FILE ('-': stdin)."),
    target_torch: Optional[str] = typer.Option(None, "--target-torch", metavar="VERSION", help="The torch release fixed code must run on (default: the installed one)."),
    check_syntax: bool = typer.Option(False, "--check-syntax", help="Also parse files no rule applies to, so a syntax error anywhere is reported (slower)."),
    unproven: bool = typer.Option(False, "--unproven", help="Also report what the source cannot prove recompiles (no varying call seen, a static compile that looks deliberate); off by default."),
    interactive: bool = typer.Option(False, "-i", "--interactive", help="Review every fix, one at a time (like `git add -p`); write the accepted ones."),
    from_trace: Optional[str] = typer.Option(None, "--from-trace", metavar="DIR", help="A TORCH_TRACE folder: report its recompiles and diff, fix or (-i) review only the findings they implicate."),
    stdin_filename: Optional[str] = typer.Option(None, "--stdin-filename", metavar="PATH", help="The name of the file read from stdin (PATH '-'): for messages, configuration and per-file-ignores."),
    quiet: bool = typer.Option(False, "-q", "--quiet", help="Print findings and errors, nothing else."),
    exit_zero: bool = typer.Option(False, "--exit-zero", help="Exit 0 even when findings remain (errors still exit 2)."),
    exclude: Optional[List[str]] = typer.Option(None, "--exclude", metavar="PATTERNS", help="Gitignore-style patterns to skip (comma-separated, relative to the current folder); replaces the configuration's `exclude`."),
    config_file: Optional[str] = typer.Option(None, "--config", metavar="PATH", help="Read [tool.fix-recompiles] from this TOML file instead of the closest pyproject.toml."),
    version: bool = typer.Option(False, "-V", "--version", is_eager=True, help="Print the version and exit."),
) -> None:
    """Report (default), diff or fix recompile causes in PATHs.

    PATH: files or folders (default: the current folder); '-' reads the source
    from stdin (name it with --stdin-filename)."""
    if version:  # `check --version`, as `ruff check --version`
        typer.echo(f"fix-recompiles {_version()}")
        raise typer.Exit(EXIT_CLEAN)
    if diff and fix:
        _err("error: --diff and --fix are exclusive (--diff writes nothing)")
        raise typer.Exit(EXIT_ERROR)
    if interactive and (diff or fix):
        _err("error: --interactive is exclusive with --diff and --fix")
        raise typer.Exit(EXIT_ERROR)
    if interactive and not sys.stdin.isatty():
        _err("error: --interactive needs a terminal on stdin; use --diff to preview the fixes or --fix to apply them")
        raise typer.Exit(EXIT_ERROR)
    if output_format not in FORMATS:
        _err(f"error: --format must be one of {', '.join(FORMATS)}, not {output_format!r}")
        raise typer.Exit(EXIT_ERROR)
    paths = _read_files_from(files_from, list(paths or []))
    if "-" in paths:
        if paths != ["-"] or files_from is not None or interactive or from_trace is not None:
            _err("error: '-' (stdin) must be the only path, without --files-from, --interactive or --from-trace")
            raise typer.Exit(EXIT_ERROR)
        settings, cfg = resolve_settings(
            [stdin_filename or "."], config_file=config_file, select=select, ignore=ignore, unsafe_fixes=unsafe_fixes,
            dynamic_fix=dynamic_fix, target_torch=target_torch, check_syntax=check_syntax, unproven=unproven,
        )
        code = _check_stdin(settings, cfg, stdin_filename, diff=diff, fix=fix, quiet=quiet, output_format=output_format, force_exclude=force_exclude, exclude=_patterns(exclude))
        raise typer.Exit(EXIT_CLEAN if exit_zero and code == EXIT_FINDINGS else code)
    if files_from is not None and not paths:
        if not quiet:
            _err("All checks passed!" if output_format == "text" else "")
        raise typer.Exit(EXIT_CLEAN)
    settings, cfg = resolve_settings(
        paths or ["."], config_file=config_file, select=select, ignore=ignore, unsafe_fixes=unsafe_fixes,
        dynamic_fix=dynamic_fix, target_torch=target_torch, check_syntax=check_syntax, unproven=unproven,
    )
    unsafe_fixes = settings.unsafe_fixes
    chosen = file_selection(cfg, _patterns(exclude), force_exclude)
    if chosen.excludes and force_exclude and paths:
        # --exclude patterns are relative to the current folder; with
        # --force-exclude they also drop files named on the command line
        named = [p for p in paths if os.path.isfile(p)]
        kept = set(selection.filter_excludes(named, chosen.excludes, ".", named, True))
        paths = [p for p in paths if p in kept or not os.path.isfile(p)]
        if not paths:
            if not quiet:
                _err("All checks passed!" if output_format == "text" else "")
            raise typer.Exit(EXIT_CLEAN)
    if from_trace is not None:
        raise typer.Exit(traced.from_trace(from_trace, paths or ["."], settings, selection=chosen, diff=diff, fix=fix, interactive=interactive))
    if interactive:
        raise typer.Exit(interactive_mode.run_interactive(paths or ["."], settings, sys.stdin, sys.stdout, sys.stderr, selection=chosen))
    cache_dir = None if no_cache or os.environ.get("FIX_RECOMPILES_NO_CACHE", "") not in ("", "0") else (os.environ.get("FIX_RECOMPILES_CACHE_DIR") or os.path.join(cfg.root, cache.CACHE_DIR))
    if cache_dir is not None and not os.environ.get("FIX_RECOMPILES_CACHE_DIR") and os.path.islink(cache_dir):
        cache_dir = None  # `.fix_recompiles_cache` is a link (a cloned tree can hold one): never read or written through
    if cache_dir is not None and not diff:
        cache.unlink_planted_links(cache_dir)  # the cache never writes through a link
    result = runner.run(
        paths or ["."],
        settings,
        jobs=jobs if jobs is not None else (os.cpu_count() or 1),
        cache_dir=cache_dir,
        cache_write=not diff,  # --diff writes nothing, not even the cache
        selection=chosen,
        progress=_progress() if sys.stderr.isatty() else None,
        render=diff or fix or output_format in ("json", "sarif"),  # machine formats carry the edits
    )
    for path, reason in result.errors:
        _err(f"error: {path}: {reason}")
    errors_before_write = len(result.errors)
    looked: List[str] = []  # the modules the note looked for: what it printed depends on them
    if paths and all(os.path.isfile(p) for p in paths) and not quiet:
        _note_unread_imports([(r.path, r.original) for r in result.results if r.error is None], [r.path for r in result.results], looked)

    findings = result.findings
    if diff:
        # the patch is made of the files' own bytes (encoding, BOM, CRLF kept)
        sys.stdout.flush()
        out = getattr(sys.stdout, "buffer", None)
        for r in result.results:
            if r.changed:
                patch = output.unified_diff_bytes(r.display_path, r.original, r.new)  # type: ignore[arg-type]
                if out is not None:
                    out.write(patch)
                else:  # a text-only stdout (embedding): best effort
                    sys.stdout.write(patch.decode(r.encoding, "replace"))
        if out is not None:
            out.flush()
        sys.stdout.flush()
        n_changed = sum(1 for r in result.results if r.changed)
        n_fixes = sum(1 for f in findings if f.applied)
        if n_changed and not quiet:
            _err(f"Would fix {n_fixes} finding{'s' if n_fixes != 1 else ''} in {n_changed} file{'s' if n_changed != 1 else ''}.")
        for line in output.summary(findings, fixed=0, errors=len(result.errors), files_changed=0, fixing=False, unsafe_fixes=unsafe_fixes):
            if not quiet and not line.startswith(("Found ", "All checks passed!")):  # "Would fix" says it
                _err(line)
        code = EXIT_FINDINGS if n_changed else EXIT_CLEAN
    else:
        written = runner.write_results(result) if fix else 0
        for path, reason in result.errors[errors_before_write:]:
            _err(f"error: {path}: {reason}")
        fixed = sum(1 for f in findings if f.applied) if fix else 0
        machine = output_format != "text"
        if output_format == "json":
            sys.stdout.write(formats.to_json(result.results))
        elif output_format == "sarif":
            sys.stdout.write(formats.to_sarif(result.results, [r for r in REGISTRY if settings.selects(r.code)], _version()))
        elif output_format == "github":
            sys.stdout.write(formats.to_github([f for f in findings if not (fix and f.applied)]))
        for f in findings if not machine else ():
            if fix and f.applied:
                continue
            typer.echo(output.format_finding(f))
        if show_statistics:
            for line in output.statistics(findings) + runner.run_summary(result.stats):
                typer.echo(line, err=machine)
        for line in output.summary(findings, fixed=fixed, errors=len(result.errors), files_changed=written, fixing=fix, unsafe_fixes=unsafe_fixes) if not quiet else ():
            typer.echo(line, err=machine)
        if sys.stderr.isatty() and not show_statistics and not quiet:
            for line in runner.run_summary(result.stats):
                _err(line)
        remaining = len(findings) - fixed
        code = EXIT_FINDINGS if remaining else EXIT_CLEAN
    if exit_zero:
        code = EXIT_CLEAN
    if result.errors:
        code = EXIT_ERROR
    elif not (diff or fix or files_from is not None or show_statistics or sys.stderr.isatty()):
        # a report that wrote nothing: the console script may replay it while
        # none of what it read changes (codemods.pipeline.replay)
        replay.replayable(
            cache_dir,
            result.inputs
            + replay.config_inputs(paths[0] if paths else ".", cfg.path)
            + replay.package_inputs(paths or ["."])
            + [(os.path.abspath(p), "stat") for p in looked]
            + replay.interpreter_inputs(),
        )
    raise typer.Exit(code)


def _note_unread_imports(files, read, looked=None) -> None:
    """A run on single files (or stdin) reads no other module: say which of
    its project's modules a file imports, whose facts it cannot see.
    ``looked``: where to note every path looked for."""
    for path, data in files:
        if data is None:  # a report keeps no bytes: read them again (a few files)
            try:
                with open(path, "rb") as fh:
                    data = fh.read()
            except OSError:
                continue
        missing = discovery.unread_imports(path, data, read, looked)
        if missing:
            shown = ", ".join(missing[:5]) + (", ..." if len(missing) > 5 else "")
            _err(
                f"note: {discovery.display_path(path)} imports modules of its project that this run did not read ({shown}): "
                "findings that need them (a class compiled here and defined there, an lr written there) are not looked for; "
                "run on their folder to include them"
            )


def _check_stdin(settings, cfg, stdin_filename, *, diff, fix, quiet, output_format, force_exclude, exclude) -> int:
    """``fix-recompiles -``: the source on stdin, as ruff does: the report on
    stdout; with ``--fix`` the (fixed) source on stdout and what remains on
    stderr; with ``--diff`` the patch.  Nothing is written to disk."""
    data = sys.stdin.buffer.read()
    name = stdin_filename or "-"
    shown = discovery.display_path(stdin_filename) if stdin_filename else "-"
    out = sys.stdout.buffer
    if stdin_filename and force_exclude:
        patterns = tuple(exclude or ()) + (cfg.excludes if exclude is None else cfg.extend_exclude)
        if not selection.filter_excludes([stdin_filename], patterns, cfg.root if exclude is None else ".", [stdin_filename], True):
            if fix:
                out.write(data)
            return EXIT_CLEAN  # excluded: passed through untouched, as ruff does
    chosen = file_selection(cfg, exclude)  # refuses a bad pattern, whether used or not
    if stdin_filename:
        settings = chosen.settings_for(stdin_filename, settings)
    result = engine.process_source(name, shown, data, settings)
    if not quiet:
        _note_unread_imports([(stdin_filename or os.path.join(os.getcwd(), "<stdin>.py"), data)], [])
    if result.error is not None:
        _err(f"error: {shown}: {result.error}")
        if fix:
            out.write(data)  # the caller (an editor) keeps its text
        return EXIT_ERROR
    findings = result.findings
    if diff:
        if result.changed:
            out.write(output.unified_diff_bytes(shown, data, result.new))  # type: ignore[arg-type]
        out.flush()
        return EXIT_FINDINGS if result.changed else EXIT_CLEAN
    if fix:
        out.write(result.new if result.changed else data)
        out.flush()
        remaining = [f for f in findings if not f.applied]
        for f in remaining:
            _err(output.format_finding(f))
        if not quiet:
            for line in output.summary(findings, fixed=len(findings) - len(remaining), errors=0, files_changed=1 if result.changed else 0, fixing=True, unsafe_fixes=settings.unsafe_fixes):
                _err(line)
        return EXIT_FINDINGS if remaining else EXIT_CLEAN
    for f in findings:
        typer.echo(output.format_finding(f))
    if not quiet:
        for line in output.summary(findings, fixed=0, errors=0, files_changed=0, fixing=False, unsafe_fixes=settings.unsafe_fixes):
            typer.echo(line)
    return EXIT_FINDINGS if findings else EXIT_CLEAN


@app.command("rules")
def rules(code: Optional[str] = typer.Argument(None, metavar="CODE", show_default=False, hidden=True)) -> None:
    """List the rules, or explain one (CODE: a rule code, e.g. FR001, or a rule name)."""
    if code is None:
        for rule in REGISTRY:
            typer.echo(f"{rule.code}  {rule.name:<20} {rule.summary}")
        typer.echo(f"{trace_registry.CODE}  {'(run)':<19} the fixes `run` makes from the trace alone (`fix-recompiles rules TRACE`)")
        return
    if code.upper() == trace_registry.CODE:
        typer.echo(trace_registry.listing(), nl=False)
        return
    rule = BY_CODE.get(code.upper()) or transforms.BY_NAME.get(code) or trace_registry.BY_NAME.get(code)
    if rule is None:
        _err(f"error: unknown rule {code!r} (see `fix-recompiles rules`)")
        raise typer.Exit(EXIT_ERROR)
    typer.echo(rule.doc(), nl=False)


@app.command(
    "run",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    options_metavar="[OPTIONS] -- CMD [ARGS]...",
)
def run_cmd(
    ctx: typer.Context,
    diff: bool = typer.Option(False, "--diff", help="Print a diff of the fixes the trace implicates; write nothing."),
    fix: bool = typer.Option(False, "--fix", help="Apply them, run CMD again and compare graphs compiled."),
    interactive: bool = typer.Option(False, "-i", "--interactive", help="Review the fixes the trace implicates one at a time, write the accepted ones, run CMD again and compare."),
    unsafe_fixes: bool = typer.Option(False, "--unsafe-fixes", help="Also apply implicated fixes that stay unsafe."),
    select: Optional[List[str]] = typer.Option(None, "--select", metavar="CODES", help="Rule codes or prefixes to enable (comma-separated)."),
    ignore: Optional[List[str]] = typer.Option(None, "--ignore", metavar="CODES", help="Rule codes or prefixes to disable (comma-separated)."),
    dynamic_fix: Optional[str] = typer.Option(None, "--dynamic-fix", metavar="remove|true", help="How FR001 cures dynamic=False: 'remove' (default) it or write 'true'."),
    target_torch: Optional[str] = typer.Option(None, "--target-torch", metavar="VERSION", help="The torch release fixed code must run on (default: the installed one)."),
    config_file: Optional[str] = typer.Option(None, "--config", metavar="PATH", help="Read [tool.fix-recompiles] from this TOML file instead of the closest pyproject.toml."),
    max_recompiles: Optional[int] = typer.Option(None, "--max-recompiles", metavar="N", help="CI guard: exit 1 when a compiled function recompiled more than N times (0: each compiles once); changes nothing."),
    output_format: str = typer.Option("text", "--format", metavar="FORMAT", help="With --max-recompiles: text, json, sarif or github (CMD's output then goes to stderr)."),
) -> None:
    """Run `-- CMD ARGS...` under TORCH_TRACE, explain its recompiles, fix their causes.

    Settings come from [tool.fix-recompiles] of the closest pyproject.toml up
    from the current folder (or --config), as for `check`."""
    if max_recompiles is not None or output_format != "text":
        _run_guard(ctx, max_recompiles, output_format, diff or fix or interactive, select, ignore, config_file, target_torch)
    if diff and fix:
        _err("error: --diff and --fix are exclusive (--diff writes nothing)")
        raise typer.Exit(EXIT_ERROR)
    if interactive and (diff or fix):
        _err("error: --interactive is exclusive with --diff and --fix")
        raise typer.Exit(EXIT_ERROR)
    if interactive and not sys.stdin.isatty():
        _err("error: --interactive needs a terminal on stdin; use --diff to preview the fixes or --fix to apply them")
        raise typer.Exit(EXIT_ERROR)
    # the same settings as `check .` in this folder (run only changes files under it)
    settings, cfg = resolve_settings(
        ["."], config_file=config_file, select=select, ignore=ignore, unsafe_fixes=unsafe_fixes,
        dynamic_fix=dynamic_fix, target_torch=target_torch,
    )
    raise typer.Exit(traced.run(list(ctx.args), settings, selection=file_selection(cfg, None), diff=diff, fix=fix, interactive=interactive))


def _run_guard(ctx, max_recompiles, output_format, fixing, select, ignore, config_file=None, target_torch=None) -> None:
    """``run --max-recompiles N [--format F] -- CMD``: the CI guard (report only)."""
    if max_recompiles is None:
        _err("error: --format with `run` needs --max-recompiles N")
        raise typer.Exit(EXIT_ERROR)
    if max_recompiles < 0:
        _err(f"error: --max-recompiles must be 0 or more, not {max_recompiles}")
        raise typer.Exit(EXIT_ERROR)
    if fixing:
        _err("error: --max-recompiles only checks; it is exclusive with --diff, --fix and -i")
        raise typer.Exit(EXIT_ERROR)
    if output_format not in FORMATS:
        _err(f"error: --format must be one of {', '.join(FORMATS)}, not {output_format!r}")
        raise typer.Exit(EXIT_ERROR)
    settings, cfg = resolve_settings(["."], config_file=config_file, select=select, ignore=ignore, target_torch=target_torch)
    raise typer.Exit(guard.guard(list(ctx.args), settings, max_recompiles, output_format, _version(), selection=file_selection(cfg, None)))


COMMANDS = ("check", "rules", "run")


#: Python's recursion limit for a run.  The analysis and libcst's visitors
#: recurse a few frames per level of an expression; at the default (1000) a
#: valid 400-term sum was "too deeply nested".  Files nested deeper than
#: ``runner.MAX_EXPRESSION_DEPTH`` (1000 levels) are refused before any
#: recursive walk, so this bounds every recursion of a run (about 4 frames a
#: level) well inside an 8 MB stack; forked workers inherit it.
RECURSION_LIMIT = 10_000


def main(argv: Optional[List[str]] = None, prog_name: str = "fix-recompiles") -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), RECURSION_LIMIT))
    if args in (["--version"], ["-V"]):
        typer.echo(f"fix-recompiles {_version()}")
        return
    if not args or (args[0] not in COMMANDS and args[0] not in ("-h", "--help")):
        args.insert(0, "check")
    app(args=args, prog_name=prog_name)


if __name__ == "__main__":
    main()
