"""Renderers: a Report in, text out. Formatting only; nothing here computes findings or costs."""

from __future__ import annotations

import importlib

from ..model import Report

# Format -> its module, imported when used (a hook prints text only).
FORMATS = {"text": "text", "json": "json", "sarif": "sarif", "markdown": "markdown", "html": "html"}


def render(report: Report, fmt: str, color: bool = False, catalog=None) -> str:
    module = importlib.import_module(f".{FORMATS[fmt]}", __package__)
    if fmt == "text":
        return module.render(report, color=color)
    if fmt == "sarif":  # rule descriptions come from the catalog the scan used (extra catalogs too)
        return module.render(report, catalog)
    return module.render(report)
