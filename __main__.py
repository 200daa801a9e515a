"""``python -m fix_recompiles`` (installed) -- the same as the ``fix-recompiles`` script."""

if __package__:  # installed: fix_recompiles/__main__.py
    from importlib import import_module

    import_module(f"{__package__}.cli").main(prog_name="fix-recompiles")
else:  # pragma: no cover - `python .` from a checkout
    import cli

    cli.main()
