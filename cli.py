"""``fix-recompiles``: the command line.

    fix-recompiles [check] PATH... [--diff | --fix] [--unsafe-fixes] [--select CODES] [--ignore CODES]
    fix-recompiles rules [CODE]

Exit codes (ruff's): 0 nothing found (or everything fixed), 1 findings remain
(or ``--diff`` would change something), 2 an error occurred. 2 wins.
"""

from __future__ import annotations

import sys
from typing import List, Optional

import typer

from codemods.context import Settings
from codemods.output import format_finding, statistics, summary, unified_diff
from codemods.runner import run, write_results
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


@app.command("check")
def check(
    paths: List[str] = typer.Argument(None, help="Files or folders (default: the current folder)."),
    diff: bool = typer.Option(False, "--diff", help="Print a unified diff of the fixes; write nothing."),
    fix: bool = typer.Option(False, "--fix", help="Apply safe fixes in place."),
    unsafe_fixes: bool = typer.Option(False, "--unsafe-fixes", help="Also apply (or show) unsafe fixes."),
    select: Optional[List[str]] = typer.Option(None, "--select", help="Rule codes or prefixes to enable (comma-separated)."),
    ignore: Optional[List[str]] = typer.Option(None, "--ignore", help="Rule codes or prefixes to disable (comma-separated)."),
    dynamic_fix: str = typer.Option("remove", "--dynamic-fix", help="How FR001 cures dynamic=False: 'remove' it or write 'true'."),
    show_statistics: bool = typer.Option(False, "--statistics", help="Print the number of findings per rule."),
) -> None:
    """Report (default), diff or fix recompile causes in PATHs."""
    if diff and fix:
        _err("error: --diff and --fix are exclusive (--diff writes nothing)")
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
    result = run(paths or ["."], settings)
    for path, reason in result.errors:
        _err(f"error: {path}: {reason}")
    errors_before_write = len(result.errors)

    findings = result.findings
    if diff:
        for r in result.results:
            if r.changed:
                before = r.original.decode(r.encoding)  # type: ignore[union-attr]
                after = r.new.decode(r.encoding)  # type: ignore[union-attr]
                sys.stdout.write(unified_diff(r.display_path, before, after))
        sys.stdout.flush()
        n_changed = sum(1 for r in result.results if r.changed)
        n_fixes = sum(1 for f in findings if f.applied)
        if n_changed:
            _err(f"Would fix {n_fixes} finding{'s' if n_fixes != 1 else ''} in {n_changed} file{'s' if n_changed != 1 else ''}.")
        for line in summary(findings, fixed=0, errors=len(result.errors), files_changed=0, fixing=False, unsafe_fixes=unsafe_fixes)[1:]:
            _err(line)
        code = EXIT_FINDINGS if n_changed else EXIT_CLEAN
    else:
        written = write_results(result) if fix else 0
        for path, reason in result.errors[errors_before_write:]:
            _err(f"error: {path}: {reason}")
        fixed = sum(1 for f in findings if f.applied) if fix else 0
        for f in findings:
            if fix and f.applied:
                continue
            typer.echo(format_finding(f))
        if show_statistics:
            for line in statistics(findings):
                typer.echo(line)
        for line in summary(findings, fixed=fixed, errors=len(result.errors), files_changed=written, fixing=fix, unsafe_fixes=unsafe_fixes):
            typer.echo(line)
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


COMMANDS = ("check", "rules")


def main(argv: Optional[List[str]] = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or (args[0] not in COMMANDS and args[0] not in ("-h", "--help")):
        args.insert(0, "check")
    app(args=args, prog_name="fix-recompiles")


if __name__ == "__main__":
    main()
