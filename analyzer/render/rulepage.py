"""One rule's page in Markdown: SARIF rule help (shown by code scanning) and `rules ID --format markdown`."""

from __future__ import annotations

from pathlib import PurePosixPath

from ..catalog import Rule
from ..fixes import CODEMODS

_FENCE_LANG = {".py": "python", ".ipynb": "python", ".cu": "cuda", ".cuh": "cuda", ".cpp": "cpp", ".cc": "cpp",
               ".h": "cpp", ".hpp": "cpp", ".toml": "toml", ".cfg": "ini", ".yml": "yaml", ".yaml": "yaml"}


def fence(code: str, lang: str = "") -> str:
    """A fenced block that no run of backticks inside the code can close early."""
    longest, run = 0, 0
    for ch in code:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{lang}\n{code.rstrip()}\n{ticks}"


def example_language(rule: Rule) -> str:
    name = PurePosixPath(rule.example_file).name
    if name == "CMakeLists.txt" or name.endswith(".cmake"):
        return "cmake"
    return _FENCE_LANG.get(PurePosixPath(name).suffix, "")


def rule_markdown(rule: Rule) -> str:
    e = rule.effort
    lang = example_language(rule)
    out = [
        f"## {rule.id}: {rule.title}",
        "",
        f"**Category** `{rule.category}` · **targets** {', '.join(rule.targets)} · **confidence** {rule.confidence}"
        f" · **evidence** {rule.evidence}",
        "",
        f"**Effort** {e.low:g} / {e.likely:g} / {e.high:g} person-days (low / likely / high) per {e.per}"
        + ("; a fallback path costs far less" if rule.fallback else "") + ".",
        "",
        "### Why it matters on Trainium",
        "",
        rule.why,
    ]
    if rule.invalid:
        out += ["", "### Example (flagged)", ""] + [fence(x, lang) for x in rule.invalid[:2]]
    if rule.valid:
        out += ["", "### Not flagged", ""] + [fence(x, lang) for x in rule.valid[:2]]
    out += ["", "### Remedy", "", rule.remedy]
    if rule.remedy_xla:
        out += ["", "On the XLA path (torch-neuronx <= 2.9): " + rule.remedy_xla]
    if rule.fix:
        how = "`neuron-ready fix`" + (" --unsafe-fixes" if rule.fix == "unsafe" else "")
        out += ["", f"Fix ({rule.fix}): {how} rewrites it: {CODEMODS[rule.codemod]} (docs/fix.md)."]
    dated = f" (as of {rule.source_date})" if rule.source_date else ""
    out += ["", "### Source", "", f"- <{rule.source}>{dated}"] + [f"- <{s}>" for s in rule.see_also]
    return "\n".join(out) + "\n"
