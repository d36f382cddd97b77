"""What the three hand-written TOML readers (catalog.py, config.py, pricing.py) share: parsing with the
line of a syntax error, and the unknown keys of a table with a did-you-mean. Each reader words its
own messages (file, rule or table, field); this module only finds the problem.
"""

from __future__ import annotations

import difflib
import re
import sys
from typing import Any, Iterable

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


class TomlSyntaxError(Exception):
    """Text that is not TOML. str() is the parser's own message (with its position); `line` and
    `problem` are that message split in two."""

    def __init__(self, error: Exception):
        super().__init__(str(error))
        text = str(error)
        self.line = getattr(error, "lineno", None) or _line_from_message(text)
        self.problem = getattr(error, "msg", None) or re.sub(r"\s*\(at line \d+, column \d+\)", "", text)


def _line_from_message(msg: str) -> int:
    m = re.search(r"line (\d+)", msg)
    return int(m.group(1)) if m else 1


def parse(text: str) -> dict[str, Any]:
    """The TOML document as a dict. Raises TomlSyntaxError."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise TomlSyntaxError(e) from None


def unknown_keys(table: dict, allowed: Iterable[str]) -> list[str]:
    """The keys of `table` outside `allowed`, in the table's order."""
    known = set(allowed)
    return [k for k in table if k not in known]


def did_you_mean(key: str, allowed: Iterable[str]) -> str:
    """" (did you mean 'x'?)" for the closest allowed key, or ""."""
    close = difflib.get_close_matches(key, list(allowed), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""
