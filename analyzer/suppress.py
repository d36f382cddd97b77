"""Inline suppressions: `# neuron-ready: ignore` and `# neuron-ready: ignore[NR1001,NR12]` on the line
(`//` in C/C++/CUDA), and `# neuron-ready: ignore-file` anywhere in a file."""

from __future__ import annotations

import re

_MARK = "neuron-ready:"
_LINE = re.compile(r"(?:#|//)\s*neuron-ready:\s*ignore(?!-file)(?:\[(?P<ids>[^\]]*)\])?")
_FILE = re.compile(r"(?:#|//)\s*neuron-ready:\s*ignore-file\b")

ALL = None  # a bare `ignore`: every rule on the line


class Suppressions:
    def __init__(self, text: str) -> None:
        self.file = False
        self.lines: dict[int, frozenset[str] | None] = {}
        if _MARK not in text:
            return
        self.file = bool(_FILE.search(text))
        for i, line in enumerate(text.splitlines(), start=1):
            if _MARK not in line:
                continue
            for m in _LINE.finditer(line):
                ids = m.group("ids")
                if ids is None:
                    self.lines[i] = ALL
                elif self.lines.get(i, frozenset()) is not ALL:
                    sel = frozenset(s.strip().upper() for s in ids.split(",") if s.strip())
                    self.lines[i] = (self.lines.get(i) or frozenset()) | sel

    def __bool__(self) -> bool:
        return self.file or bool(self.lines)

    def covers(self, rule_id: str, category: str, line: int) -> bool:
        if self.file:
            return True
        if line not in self.lines:
            return False
        sel = self.lines[line]
        if sel is ALL:
            return True
        return any(rule_id.startswith(s) or s == category.upper() for s in sel)
