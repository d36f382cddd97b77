"""Markdown rendered the way GitHub reads a comment (CommonMark with its table extension, raw HTML
on), and what user text must never become in the result."""

from __future__ import annotations

import re

from markdown_it import MarkdownIt

_MD = MarkdownIt("commonmark").enable(["table", "strikethrough"])


def to_html(text: str) -> str:
    return _MD.render(text)


OUR_DOCS = "https://github.com/neuron-ready/neuron-ready/blob/main/docs/"


def live_markup(html: str, ours: int = 0) -> list[str]:
    """Tags, headings, mentions and comment markers in rendered HTML that we did not write.
    `ours`: how many HTML comments are our own header (the marker and valid-at lines)."""
    problems = []
    for tag in ("img", "script", "iframe", "h1", "h2", "h4", "h5", "h6"):
        problems += re.findall(rf"<{tag}[\s>]", html)
    # links: only ours (rule pages and the effort model in the project's docs), never one from user text
    problems += [a for a in re.findall(r"<a\b[^>]*>", html) if not re.fullmatch(rf'<a href="{re.escape(OUR_DOCS)}[^"]*">', a)]
    problems += re.findall(r"(?<![\w\u200b])@[A-Za-z0-9]", re.sub(r"<code>.*?</code>", "", html, flags=re.S))
    comments = re.findall(r"<!--.*?-->", html, flags=re.S)
    problems += comments[ours:]
    return problems
