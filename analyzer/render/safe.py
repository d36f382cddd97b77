"""Text from the scanned tree made inert for each output.

Paths, symbols, snippets, extension names and catalog messages come from whoever wrote the tree
(in CI: anyone who opens a pull request). Every renderer passes them through here, so that none of
them can start a new line (a GitHub workflow command is a line starting with `::`), move the
cursor of a terminal, or become Markdown or HTML: a heading, an image, a link, a mention, or our
own hidden comment marker.
"""

from __future__ import annotations

import re

# C0 and C1 controls, DEL, Unicode line/paragraph separators and bidirectional overrides.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# A line the Actions runner reads as a command, after leading blanks: `::cmd` or the older `##[cmd]`.
_COMMAND_START = re.compile(r"^(\s*)(:(?=:)|#(?=#\[))")
# What GitHub links by itself in a comment's text: a mention, an issue reference (`#123`, `GH-123`),
# a bare URL. A zero-width space after the trigger keeps the text as it reads and links nothing.
_AUTOLINK = re.compile(r"@(?=[A-Za-z0-9])|#(?=\d)|(?i:\bgh-(?=\d)|\b(?:https?|ftp)(?=://)|\bwww(?=\.))")
# Markdown that inline user text must not produce: emphasis, links and images, HTML, tables, code.
_MD_SPECIAL = {c: "\\" + c for c in "\\*_[]~!|`"} | {"<": "&lt;", ">": "&gt;", "&": "&amp;"}


def _escape(ch: str) -> str:
    if ch in _NAMED:
        return _NAMED[ch]
    return f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}"


def visible(text: object) -> str:
    """One line of plain text: control characters and line breaks shown as escapes (`\\n`,
    `\\x1b`), and a leading `::` or `##[` defused so the text can never be a workflow command."""
    out = _CONTROL.sub(lambda m: _escape(m.group()), str(text))
    return _COMMAND_START.sub(lambda m: m.group(1) + f"\\x{ord(m.group(2)):02x}", out)


def code(text: object) -> str:
    """A Markdown code span around `text` (one line) that backticks inside cannot end early.
    Nothing escapes inside a code span, so an HTML comment opener gets a zero-width space: the
    span looks the same, and the body holds no `<!--` that could pass for our comment marker."""
    text = visible(text).replace("<!--", "<\u200b!--")
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    # `\|`: a table cell reads an unescaped pipe as a column break, even inside a code span.
    return f"{ticks}{pad}{text}{pad}{ticks}".replace("|", "\\|")


def plain(text: object) -> str:
    """Markdown that shows `text` literally on one line: no markup, HTML, mention, issue reference
    or link survives."""
    out = "".join(_MD_SPECIAL.get(c, c) for c in visible(text))
    return _AUTOLINK.sub(lambda m: m.group() + "\u200b", out)


def inline(text: object) -> str:
    """Markdown for one table cell or line. Code spans the text means (catalog messages use them:
    a backtick run closed by a run of the same length, not escaped by a backslash) stay code
    spans; everything else is shown literally."""
    text = visible(text)
    out, pos, plain_from = [], 0, 0
    while pos < len(text):
        ch = text[pos]
        if ch == "\\" and pos + 1 < len(text):
            pos += 2  # an escaped character, a backtick included, is literal text
            continue
        if ch != "`":
            pos += 1
            continue
        run = len(text) - pos - len(text[pos:].lstrip("`"))
        close = _closing_run(text, pos + run, run)
        if close < 0:
            pos += run
            continue
        out.append(plain(_unescape(text[plain_from:pos])))
        body = text[pos + run:close]
        if len(body) > 1 and body[0] == body[-1] == " " and body.strip(" "):
            body = body[1:-1]  # CommonMark strips one space on each side
        out.append(code(body))
        pos = plain_from = close + run
    out.append(plain(_unescape(text[plain_from:])))
    return "".join(out)


def _closing_run(text: str, start: int, run: int) -> int:
    for m in re.finditer(r"`+", text[start:]):
        if len(m.group()) == run:
            return start + m.start()
    return -1


def _unescape(text: str) -> str:
    """The text a Markdown author meant: `\\x` for ASCII punctuation x is x."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", text)
