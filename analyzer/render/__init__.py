"""Renderers: a Report in, text out. Formatting only; nothing here computes findings or costs."""

from __future__ import annotations

from ..model import Report
from . import json as json_fmt
from . import text as text_fmt

FORMATS = {"text": text_fmt.render, "json": json_fmt.render}


def render(report: Report, fmt: str, color: bool = False) -> str:
    if fmt == "text":
        return text_fmt.render(report, color=color)
    return FORMATS[fmt](report)
