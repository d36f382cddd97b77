"""Golden files: compare what a scan says with what was accepted; UPDATE_GOLDEN=1 accepts the new text."""

from __future__ import annotations

import os


def golden_text(path: str, got: str) -> str:
    """The accepted text at `path` (rewritten first with `got` under UPDATE_GOLDEN=1)."""
    if os.environ.get("UPDATE_GOLDEN"):
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(got)
    with open(path, encoding="utf-8") as fh:
        return fh.read()
