"""Audit of FR014's purity proof on real code: every memo-shaped method.

    python benchmarks/memo_audit.py [DIR ...]     (default: benchmarks/corpus benchmarks/training)

FR014 makes its fix safe when the memo's value is proven a pure function of
its key (codemods/analysis/purity.py).  Real libraries rarely compile, so
FR014 itself reports almost nothing on the corpora; this script applies the
same proof to every memo of every class, compiled or not: an attribute that
``__init__`` sets to ``None`` or ``{}``, checked and filled by one of the
class's methods, in a form FR014 can rewrite.  It prints one line per memo,
``SAFE`` or ``unsafe -- <what was not proven>``, and the totals.  Read every
``SAFE`` line: a memo judged pure that is not is a false safe fix waiting
for a compile site.  (The first audit, 2026-12-06, found one: transformers'
``_LazyConfigMapping`` memo of ``importlib.import_module``; fixed.)

Not a test: it reads the fetched corpora (benchmarks/fetch_corpus.sh,
benchmarks/fetch_training.sh).
"""

from __future__ import annotations

import ast
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from codemods.analysis.context import FileContext, Settings  # noqa: E402
from codemods.pipeline.engine import FileError, parse_ast  # noqa: E402
from codemods.transforms.compiled_memo import CompiledMemo, memo_proof_of_class  # noqa: E402


def main(roots) -> int:
    rule = CompiledMemo()
    safe = unsafe = 0
    for root in roots:
        if not os.path.isdir(root):
            print(f"{root}: missing, skipped", file=sys.stderr)
            continue
        for dirpath, dirs, files in os.walk(root):
            dirs.sort()
            for name in sorted(files):
                if not name.endswith(".py"):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, "rb") as fh:
                    data = fh.read()
                if b"None" not in data and b"{}" not in data and b"dict(" not in data:
                    continue
                try:
                    source = parse_ast(path, data)
                except FileError:
                    continue
                ctx = FileContext(path, path, Settings(), source=source)
                for cls in (n for n in ast.walk(source.tree) if isinstance(n, ast.ClassDef)):
                    for memo, why in memo_proof_of_class(rule, ctx, cls):
                        if why is None:
                            safe += 1
                            print(f"SAFE   {path}:{memo.fn.lineno} {cls.name}.{memo.method} self.{memo.attr}")
                        else:
                            unsafe += 1
                            print(f"unsafe {path}:{memo.fn.lineno} {cls.name}.{memo.method} self.{memo.attr} -- {why}")
    print(f"memos: {safe + unsafe}; proven pure (safe fix): {safe}; not proven: {unsafe}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or [os.path.join(HERE, "corpus"), os.path.join(HERE, "training")]))
