"""The ``fix-recompiles`` console script and ``python -m fix_recompiles``.

First the replay of an unchanged report (:mod:`codemods.replay`, standard
library only: an unchanged run costs the interpreter's start and a stat of
what it read); otherwise the command line (``cli.main``), its output
recorded for the next replay when the command allows it."""

import sys
from importlib import import_module


def _module(name: str):
    # installed: fix_recompiles.<name>; a checkout run as `python .`: <name>
    return import_module(f"{__package__}.{name}" if __package__ else name)


def main() -> None:
    args = sys.argv[1:]
    replay = _module("codemods.replay")
    code = replay.replay(args)
    if code is not None:
        sys.exit(code)
    recording = replay.record(args)
    code = 1
    try:
        _module("cli").main(args, prog_name="fix-recompiles")
        code = 0
    except SystemExit as exc:
        code = exc.code
        raise
    finally:
        replay.finish(recording, code)


if __name__ == "__main__":
    main()
