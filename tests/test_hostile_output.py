"""Every renderer against a tree whose names and texts were written to attack the output: nothing
reaches a terminal raw, and no line can be read as a GitHub workflow command."""

from __future__ import annotations

import json
import re

from cli import run_cli
from test_markdown import hostile_tree

CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _is_command(line: str) -> bool:
    return line.lstrip().startswith(("::", "##["))


def test_text_diff_html_and_sarif_keep_user_text_inert(tmp_path):
    hostile_tree(tmp_path / "head")
    # not a byte copy of the hostile-named file (copies are one port, copies.py): both must be findings
    (tmp_path / "head" / "::set-output name=x::y.py").write_text("import torch\ntorch.cuda.synchronize()  # y\n", encoding="utf-8")
    (tmp_path / "head" / "##[error]old-style.py").write_text("def broken(:\n", encoding="utf-8")
    outs = {}
    for fmt in ("text", "markdown", "html", "sarif", "json"):
        r = run_cli("scan", str(tmp_path / "head"), "--format", fmt, "--no-cache", "--color")
        assert r.code == 0, r.err
        outs[fmt] = r.out
    for fmt in ("text", "markdown", "html"):
        assert not [line for line in outs[fmt].splitlines() if _is_command(line)], fmt
        ours = re.sub(r"\x1b\]8;;[^\x1b]*\x1b\\", "", outs[fmt])  # our rule links (terminal hyperlinks)
        assert not CONTROL.search(ours.replace("\x1b[", "")), fmt  # only the --color escapes
    assert "\\n::error file=train.py" in outs["text"] and "\\x3a:set-output" in outs["text"]
    assert "<img" not in outs["html"] and "&lt;img" in outs["html"]
    sarif = json.loads(outs["sarif"])
    texts = [r["message"]["text"] for r in sarif["runs"][0]["results"]]
    assert texts and not any(CONTROL.search(t) for t in texts)
    # the JSON report keeps the real names: it is data, not display
    assert any("\n::error" in f["path"] for f in json.loads(outs["json"])["findings"])

    base = tmp_path / "base"
    base.mkdir()
    (tmp_path / "b.json").write_text(run_cli("scan", str(base), "--format", "json", "--no-cache").out)
    (tmp_path / "h.json").write_text(outs["json"])
    d = run_cli("diff", str(tmp_path / "b.json"), str(tmp_path / "h.json"))
    assert d.code == 0 and not [line for line in d.out.splitlines() if _is_command(line)]
    assert not CONTROL.search(d.out)
