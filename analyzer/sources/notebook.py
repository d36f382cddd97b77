"""Jupyter notebooks: code cells become one Python text, with IPython-only lines blanked out.

Magics (`%time`, `%%bash` cells), shell escapes (`!pip install`) and help lines (`x?`) are not
Python; they are replaced by empty lines so line numbers still map back to (cell, line).
"""

from __future__ import annotations

import json

# Cell magics whose body is still Python.
_PYTHON_CELL_MAGICS = {"time", "timeit", "capture", "prun", "debug", "autoreload"}


class NotebookError(ValueError):
    pass


def _cell_lines(source) -> list[str]:
    if isinstance(source, list):
        text = "".join(s for s in source if isinstance(s, str))
    elif isinstance(source, str):
        text = source
    else:
        raise NotebookError("a cell's source is neither a string nor a list of strings")
    return text.splitlines()


def _python_line(line: str) -> str:
    s = line.lstrip()
    if s.startswith(("%", "!")) or (s.endswith("?") and not s.startswith("#")):
        return ""
    return line


def notebook_cells(text: str) -> list[tuple[int, list[str]]]:
    """(cell number, python lines) for every code cell; cell numbers count all cells from 1."""
    try:
        nb = json.loads(text)
    except json.JSONDecodeError as e:
        raise NotebookError(f"not valid JSON: {e.msg} at line {e.lineno}") from None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise NotebookError("no 'cells' list (not a Jupyter notebook, or nbformat < 4)")
    out = []
    for number, cell in enumerate(nb["cells"], start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        lines = _cell_lines(cell.get("source", ""))
        if lines and lines[0].lstrip().startswith("%%"):
            magic = lines[0].lstrip()[2:].split()[0] if lines[0].lstrip()[2:].split() else ""
            if magic not in _PYTHON_CELL_MAGICS:
                continue  # %%bash, %%writefile, %%html...: not Python
            lines = [""] + lines[1:]
        out.append((number, [_python_line(line) for line in lines]))
    return out


def join_cells(cells: list[tuple[int, list[str]]]) -> tuple[str, list[tuple[int, int]]]:
    """One Python text and, per text line (0-based), its (cell, line in cell)."""
    lines: list[str] = []
    where: list[tuple[int, int]] = []
    for number, cell_lines in cells:
        for i, line in enumerate(cell_lines, start=1):
            lines.append(line)
            where.append((number, i))
        lines.append("")  # cells are separate statements
        where.append((number, len(cell_lines) + 1))
    return "\n".join(lines) + "\n", where
