"""Regenerate expected golden files for review (the tests never do this).

    python tests/regen_golden.py [PASS_FOLDER ...]

Writes ``<case>.out.py`` (or ``<case>/out/...``) where the output differs from
the input, and deletes a stale expected file where the output is unchanged.
Review the result with ``git diff tests/golden``.
"""

from __future__ import annotations

import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from golden import discover_cases, run_case  # noqa: E402


def main(folders) -> None:
    for case in discover_cases():
        if folders and case.pass_folder not in folders:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            out = run_case(case, tmp)
        for rel, data in out.items():
            with open(case.input_files()[rel], "rb") as fh:
                original = fh.read()
            target = case.expected_path(rel)
            if data == original:
                if os.path.exists(target):
                    os.remove(target)
                    print(f"removed {os.path.relpath(target)} (output unchanged)")
                continue
            os.makedirs(os.path.dirname(target), exist_ok=True)
            old = open(target, "rb").read() if os.path.exists(target) else None
            if old != data:
                with open(target, "wb") as fh:
                    fh.write(data)
                print(f"wrote {os.path.relpath(target)}")


if __name__ == "__main__":
    main(sys.argv[1:])
