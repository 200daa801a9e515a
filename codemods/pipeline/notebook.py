"""Jupyter notebooks (``.ipynb``) as the analysis reads them: the code cells
joined into one Python module, and the fixed module split back into the
cells of the JSON, which keeps its outputs, metadata and layout.

The module holds each code cell after a marker statement
``__fix_recompiles_cell__ = N`` (a statement, not a comment: a statement a
fix inserts before a cell's first line stays in that cell).  A line the
kernel runs as IPython and not as Python (``%time x``, ``!pip install``,
``files = !ls``, a cell under a ``%%`` cell magic) reads as ``pass`` at its
indentation, and goes back as it was.  Findings carry their cell (``cell``,
1-based over all cells, as Jupyter counts) and their line within it.

A notebook is written back only when the JSON library reproduces its bytes
exactly with one of the layouts notebooks are saved in (nbformat's: one
space of indentation, sorted keys, no ASCII escapes; also 2 and 4 spaces, in
file order); otherwise its fixes are not applied and the run says so."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from ..findings import FileError, Finding

SUFFIX = ".ipynb"
MARKER = "__fix_recompiles_cell__"
_MARKER_LINE = re.compile(rf"^{MARKER} = (\d+)\n?$")
#: a line IPython runs instead of Python: a line magic, a shell escape, a
#: name bound to either (``files = !ls``), a help request (``x?``)
_IPYTHON_LINE = re.compile(r"^\s*(?:[%!]|[A-Za-z_]\w*\s*=\s*[%!]|[A-Za-z_][\w.]*\?{1,2}\s*$)")
_PLACEHOLDER = "pass  # <an IPython line>"
#: a line of the module a message names
_LINE_NAMED = re.compile(r"\bline (\d+)\b")


def is_notebook(path: str) -> bool:
    return path.endswith(SUFFIX)


@dataclass
class _Cell:
    index: int  # in the notebook's cells, 0-based
    #: the first line of the cell's code in the module (1-based)
    first: int
    lines: List[str]
    #: line (0-based, in the cell) -> the original IPython line it stands for
    magics: Dict[int, str] = field(default_factory=dict)


class Notebook:
    """One notebook: its JSON, its code cells, and how to write it back."""

    def __init__(self, display: str, data: bytes) -> None:
        self.display = display
        self.data = data
        try:
            text = data.decode("utf-8-sig")
            self.doc = json.loads(text)
        except UnicodeDecodeError as exc:
            raise FileError(display, f"not a valid notebook: cannot decode as UTF-8 ({exc.reason})") from None
        except json.JSONDecodeError as exc:
            raise FileError(display, f"not a valid notebook: JSON error at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
        except RecursionError:
            raise FileError(display, "not a valid notebook: nested too deeply") from None
        cells = self.doc.get("cells") if isinstance(self.doc, dict) else None
        if not isinstance(cells, list) or not all(isinstance(c, dict) for c in cells):
            raise FileError(display, "not a valid notebook: no list of cells")
        self.cells: List[_Cell] = []
        parts: List[str] = []
        line = 1
        for index, cell in enumerate(cells):
            if cell.get("cell_type") != "code":
                continue
            source = cell.get("source", "")
            text = "".join(source) if isinstance(source, list) else str(source)
            lines = text.split("\n")
            magics: Dict[int, str] = {}
            whole = bool(lines) and lines[0].lstrip().startswith("%%")  # a cell magic: not Python
            for k, ln in enumerate(lines):
                if whole or _IPYTHON_LINE.match(ln):
                    if ln.strip() or whole:
                        magics[k] = ln
                        indent = ln[: len(ln) - len(ln.lstrip())] if not whole else ""
                        lines[k] = indent + _PLACEHOLDER if ln.strip() else ""
            parts.append(f"{MARKER} = {index + 1}\n")
            parts.append("\n".join(lines) + "\n")
            self.cells.append(_Cell(index, line + 1, lines, magics))
            line += 1 + len(lines)
        self.python = "".join(parts).encode("utf-8")

    # -- positions ------------------------------------------------------------
    def locate(self, line: int) -> Tuple[int, int]:
        """(cell number, 1-based as Jupyter counts; line within it) of a line of the module."""
        for cell in reversed(self.cells):
            if line >= cell.first:
                return cell.index + 1, line - cell.first + 1
        return 1, line

    def place(self, finding: Finding) -> None:
        """Put ``finding`` in its cell, and the module lines its message
        names (``line 11``) in theirs (``cell 4, line 2``)."""
        cell, line = self.locate(finding.line)
        end_cell, end_line = self.locate(finding.end_line)
        finding.cell = cell
        finding.line = line
        finding.end_line = end_line if end_cell == cell else line

        def named(m: "re.Match") -> str:
            c, k = self.locate(int(m.group(1)))
            return f"cell {c}, line {k}"

        finding.message = _LINE_NAMED.sub(named, finding.message)

    # -- writing back ---------------------------------------------------------
    def _layout(self) -> Optional[Tuple[object, bool, bool, str]]:
        """(indent, sort_keys, ensure_ascii, tail) that reproduce the file's bytes."""
        text = self.data.decode("utf-8-sig")
        bom = self.data.startswith(b"\xef\xbb\xbf")
        for indent in (1, 2, 4, None):
            for sort_keys in (True, False):
                for ensure_ascii in (False, True):
                    dumped = json.dumps(self.doc, indent=indent, sort_keys=sort_keys, ensure_ascii=ensure_ascii)
                    for tail in ("\n", ""):
                        if dumped + tail == text and not bom:
                            return indent, sort_keys, ensure_ascii, tail
        return None

    def cell_texts(self, new: bytes) -> Dict[int, str]:
        """By cell index (0-based), the code of each code cell of the module
        ``new`` (this notebook's module, fixed), its IPython lines put back."""
        chunks: Dict[int, List[str]] = {}
        current: Optional[int] = None
        for ln in new.decode("utf-8").splitlines(keepends=True):
            m = _MARKER_LINE.match(ln)
            if m:
                current = int(m.group(1)) - 1
                chunks[current] = []
            elif current is not None:
                chunks[current].append(ln)
            elif ln.strip():
                raise FileError(self.display, "fixes not applied: a fix wrote code before the first cell")
        if sorted(chunks) != [c.index for c in self.cells]:
            raise FileError(self.display, "fixes not applied: a fix moved a cell boundary")
        out: Dict[int, str] = {}
        for cell in self.cells:
            got = "".join(chunks[cell.index])
            got = got[:-1] if got.endswith("\n") else got  # the newline the module added after the cell
            lines = got.split("\n")
            # the IPython lines go back as they were (the fixes insert statements, never into them)
            placeholders = [k for k, ln in enumerate(lines) if ln.strip() == _PLACEHOLDER]
            originals = [cell.magics[k] for k in sorted(cell.magics) if cell.magics[k].strip()]
            if len(placeholders) != len(originals):
                raise FileError(self.display, f"fixes not applied: a fix changed an IPython line of cell {cell.index + 1}")
            for k, original in zip(placeholders, originals):
                lines[k] = original
            out[cell.index] = "\n".join(lines)
        return out

    def cell_source(self, index: int) -> str:
        """The code of cell ``index`` (0-based) as the notebook holds it."""
        source = self.doc["cells"][index].get("source", "")
        return "".join(source) if isinstance(source, list) else str(source)

    def with_python(self, new: bytes) -> bytes:
        """The notebook's bytes with the code cells of the fixed module ``new``."""
        layout = self._layout()
        if layout is None:
            raise FileError(self.display, "fixes not applied: this notebook's JSON layout cannot be kept (written by a tool other than Jupyter?); `--diff` of the cells is not available either")
        cells = self.doc["cells"]
        for index, text in self.cell_texts(new).items():
            source = cells[index].get("source", "")
            if text == self.cell_source(index):
                continue  # unchanged: its JSON stays as it was
            if isinstance(source, list):
                cells[index]["source"] = [ln for ln in text.splitlines(keepends=True)]
            else:
                cells[index]["source"] = text
        indent, sort_keys, ensure_ascii, tail = layout
        return (json.dumps(self.doc, indent=indent, sort_keys=sort_keys, ensure_ascii=ensure_ascii) + tail).encode("utf-8")
