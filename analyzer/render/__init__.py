"""Renderers: a Report in, text out. Formatting only; nothing here computes findings or costs."""

from __future__ import annotations

from ..model import Report
from . import html as html_fmt
from . import json as json_fmt
from . import markdown as markdown_fmt
from . import sarif as sarif_fmt
from . import text as text_fmt

FORMATS = {"text": text_fmt.render, "json": json_fmt.render, "sarif": sarif_fmt.render, "markdown": markdown_fmt.render,
           "html": html_fmt.render}


def render(report: Report, fmt: str, color: bool = False, catalog=None, min_confidence: str | None = None,
           statistics: bool = False) -> str:
    """`min_confidence` and `statistics` shape the text report only; the estimate never changes."""
    if fmt == "text":
        return text_fmt.render(report, color=color, min_confidence=min_confidence, statistics=statistics)
    if fmt == "sarif":  # rule descriptions come from the catalog the scan used (extra catalogs too)
        return sarif_fmt.render(report, catalog)
    return FORMATS[fmt](report)
