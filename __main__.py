"""The ``fix-recompiles`` console script and ``python -m fix_recompiles``.

First the replay of an unchanged report (:mod:`codemods.pipeline.replay`, standard
library only: an unchanged run costs the interpreter's start and a stat of
what it read); otherwise the command line (``cli.main``), its output
recorded for the next replay when the command allows it."""

import sys

# installed: fix_recompiles.__main__; a checkout run as `python .`: __main__
if __package__:
    from .codemods.pipeline import replay
else:
    from codemods.pipeline import replay


def main() -> None:
    args = sys.argv[1:]
    code = replay.replay(args)
    if code is not None:
        sys.exit(code)
    recording = replay.record(args)
    code = 1
    try:
        if __package__:
            from . import cli
        else:
            import cli
        cli.main(args, prog_name="fix-recompiles")
        code = 0
    except SystemExit as exc:
        code = exc.code
        raise
    finally:
        replay.finish(recording, code)


if __name__ == "__main__":
    main()
