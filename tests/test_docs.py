"""The docs hold together: every relative link of README.md and docs/ resolves (to a file, and to a
heading or anchor when it names one), the reports' links to the hosted docs land, the README stays
an entry page, and the reference pages name what the code has (every configuration key, every JSON
field they show)."""

from __future__ import annotations

import glob
import json
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from markdown_it import MarkdownIt

from cli import run_cli
from conftest import REPO
from neuron_ready.catalog import load_catalog
from neuron_ready.config import KEYS, WORKLOAD_KEYS
from neuron_ready.render import common

_MD = MarkdownIt("commonmark").enable(["table", "strikethrough"])
# Links written as the hosted page (as the reports write them) are checked against this tree too.
HOSTED = "https://github.com/neuron-ready/neuron-ready/blob/main/"
PAGES = sorted([REPO / "README.md", *(REPO / "docs").rglob("*.md")])


def _inline_tokens(text: str):
    for token in _MD.parse(text):
        yield token
        yield from token.children or ()


def links(text: str) -> list[str]:
    """Link and image targets of a Markdown text, as CommonMark reads them (never inside code)."""
    out = []
    for t in _inline_tokens(text):
        if t.type == "link_open":
            out.append(str(t.attrGet("href")))
        elif t.type == "image":
            out.append(str(t.attrGet("src")))
    return out


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = path.read_text(encoding="utf-8")
    found: set[str] = set(re.findall(r'<a (?:id|name)="([^"]+)"', text))
    seen: dict[str, int] = {}
    tokens = _MD.parse(text)
    for i, t in enumerate(tokens):
        if t.type == "heading_open":
            words = "".join(c.content for c in tokens[i + 1].children if c.type in ("text", "code_inline"))
            slug = github_slug(words)
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            found.add(slug if n == 0 else f"{slug}-{n}")
    return found


def broken(page: Path, href: str) -> str | None:
    """Why a link of `page` does not resolve in this tree, or None (external links are not fetched)."""
    if href.startswith(HOSTED):
        base, href = REPO, href[len(HOSTED):]
    elif urlsplit(href).scheme:
        return None
    else:
        base = page.parent
    parts = urlsplit(href)
    target = (base / unquote(parts.path)).resolve() if parts.path else page
    if not target.exists():
        return f"{page.relative_to(REPO)}: {href}: no such file"
    if REPO.resolve() not in (target, *target.parents):
        return f"{page.relative_to(REPO)}: {href}: outside the repository"
    if parts.fragment and target.suffix == ".md" and parts.fragment not in anchors(target):
        return f"{page.relative_to(REPO)}: {href}: no heading or anchor #{parts.fragment} in {target.relative_to(REPO)}"
    return None


def test_the_link_checker_catches_a_missing_file_and_a_missing_anchor():
    page = REPO / "docs" / "commands.md"
    assert broken(page, "configuration.md") is None
    assert broken(page, "configuration.md#the-workload") is None
    assert broken(page, "../README.md#quick-start") is None
    assert "no such file" in broken(page, "configuration-old.md")
    assert "no heading or anchor #no-such-section" in broken(page, "configuration.md#no-such-section")
    assert "no such file" in broken(page, HOSTED + "docs/nothing.md")
    assert broken(page, "https://example.com/elsewhere") is None


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page):
    problems = [b for href in links(page.read_text(encoding="utf-8")) if (b := broken(page, href))]
    assert not problems, "\n".join(problems)


def test_the_reports_links_to_the_hosted_docs_land():
    rules_page = REPO / "docs" / "rules.md"
    ids = anchors(rules_page)
    missing = [r.id for r in load_catalog() if urlsplit(common.rule_url(r.id)).fragment not in ids]
    assert not missing, f"docs/rules.md has no anchor for {missing}"
    assert broken(REPO / "README.md", common.EFFORT_DOCS) is None
    assert common.EFFORT_DOCS.startswith(HOSTED) and common.rule_url("NR1001").startswith(HOSTED)


def test_readme_is_an_entry_page():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 150
    for page in ("commands", "configuration", "contexts", "json", "catalog", "rules", "ci", "effort-model",
                 "architecture"):
        assert f"(docs/{page}.md" in text, page


def test_every_configuration_key_is_documented():
    text = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    table_keys = set(re.findall(r"^\| `([a-z-]+)` \|", text, re.M))
    assert table_keys == set(KEYS) | set(WORKLOAD_KEYS)


def _shapes(value, path=(), out=None) -> dict[tuple, set[str]]:
    """Every object's keys in a JSON document, by its path (list items share one path)."""
    out = {} if out is None else out
    if isinstance(value, dict):
        out.setdefault(path, set()).update(value)
        for k, v in value.items():
            _shapes(v, path + (k,), out)
    elif isinstance(value, list):
        for v in value:
            _shapes(v, path + ("[]",), out)
    return out


def test_the_json_page_shows_only_fields_real_reports_have(tmp_path):
    text = (REPO / "docs" / "json.md").read_text(encoding="utf-8")
    shown = _shapes(json.loads(re.search(r"```json\n(.+?)\n```", text, re.S).group(1)))
    real: dict[tuple, set[str]] = {}
    for path in glob.glob(str(REPO / "tests" / "golden" / "*.json")):
        _shapes(json.loads(Path(path).read_text(encoding="utf-8")), out=real)
    (tmp_path / "broken.py").write_text("import torch\ndef (:\n", encoding="utf-8")  # a report with a diagnostic
    _shapes(json.loads(run_cli("scan", str(tmp_path), "--format", "json", "--isolated").out), out=real)
    problems = {path: keys - {"..."} - real.get(path, set()) for path, keys in shown.items()}
    assert not {p: k for p, k in problems.items() if k}, problems
