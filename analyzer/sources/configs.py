"""Config files (YAML, JSON, TOML): every scalar value with its dotted key and line, and the
launch commands held in string values.

`values` is a list of `[dotted_key, value, line]` (list indices are numbers in the key; the line
is the key's), in line order, at most MAX_VALUES per file. Entry detection and the opt-in analysis
read the defaults a repository ships in its configs (`attn_impl: flash`, `use_fused_adam: true`)
and the commands it runs (`command: "torchrun --nproc_per_node 8 train.py"`).

YAML is composed with PyYAML's safe loader only (nodes, never constructed objects) and walked
with a node budget, so aliases that expand exponentially (a "billion laughs" file) or refer to
themselves cost a bounded walk. JSON keeps its lines through a small walk over `json`'s own
scanner; TOML lines are looked up best-effort from the table headers and `key =` lines.
"""

from __future__ import annotations

import bisect
import datetime
import json
import math
import re
import sys
from json.decoder import scanstring
from pathlib import PurePosixPath

import yaml

from .launch import launches_in_text, launches_in_words

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CONFIG_SUFFIXES = (".yaml", ".yml", ".json", ".toml")
MAX_CONFIG_BYTES = 256 * 1024  # larger JSON/YAML is data, not configuration: no job
MAX_VALUES = 5000
_MAX_NODES = 50_000  # YAML nodes walked per file (aliases make a small file a large tree)
_MAX_DEPTH = 64
_MAX_LIST_WORDS = 100  # a YAML/JSON list longer than this is not a command line
# Lock files, JSON with comments (editor and TypeScript configs) and Jinja-templated conda recipes.
_NOT_CONFIG = re.compile(
    r"^(package-lock\.json|npm-shrinkwrap\.json|.+[-.]lock\.json|tsconfig.*\.json|jsconfig.*\.json"
    r"|\.?devcontainer\.json|meta\.ya?ml)$",
    re.I,
)
_LAUNCH_HINT = re.compile(r"python|torchrun|accelerate|deepspeed|composer|lightning|fabric|torch\.distributed", re.I)
_TOML_ERROR_LINE = re.compile(r"\(at line (\d+)")
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_YAML = "tag:yaml.org,2002:"
_SAFE = yaml.constructor.SafeConstructor()
_SCALAR_BUILDERS = {
    _YAML + "int": _SAFE.construct_yaml_int,
    _YAML + "float": _SAFE.construct_yaml_float,
    _YAML + "bool": _SAFE.construct_yaml_bool,
    _YAML + "null": _SAFE.construct_yaml_null,
}


class ConfigError(Exception):
    """A config file that does not parse: a reason and, where known, the line."""

    def __init__(self, message: str, line: int | None = None, kind: str = "syntax-error") -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.kind = kind


def is_config_name(rel: str) -> bool:
    name = PurePosixPath(rel).name
    return name.endswith(CONFIG_SUFFIXES) and not _NOT_CONFIG.match(name)


def worth_reading(path: str, rel: str, size: int) -> bool:
    """Decided in discovery: JSON/YAML past MAX_CONFIG_BYTES and JSON whose top level is a list
    (records, not settings) get no job. Only the first bytes of a JSON file are read."""
    if size > MAX_CONFIG_BYTES:
        return False
    if rel.endswith(".json"):
        try:
            with open(path, "rb") as fh:
                head = fh.read(512)
        except OSError:
            return True  # the scan says why it cannot be read
        return not head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"[")
    return True


class _Values:
    """Collects values and launches, up to MAX_VALUES."""

    def __init__(self) -> None:
        self.values: list[list] = []
        self.launches: list[dict] = []
        self.capped = False

    @property
    def full(self) -> bool:
        return len(self.values) >= MAX_VALUES

    def add(self, key: list, value, line: int, text_line: int | None = None) -> None:
        """`text_line`: where the text of a multi-line value starts (a YAML `|` block)."""
        if self.full:
            self.capped = True
            return
        if isinstance(value, float) and not math.isfinite(value):
            value = str(value)  # JSON has no inf/nan
        elif isinstance(value, (datetime.date, datetime.time)):
            value = value.isoformat()
        elif not isinstance(value, (str, int, float, bool, type(None))):
            value = str(value)
        self.values.append([".".join(map(str, key)), value, line])
        if isinstance(value, str) and _LAUNCH_HINT.search(value):
            self.launches.extend(launches_in_text(value, text_line or line))

    def add_words(self, items: list, line: int) -> None:
        """A list of strings that may be a command line: ["torchrun", "train.py"]."""
        if 1 < len(items) <= _MAX_LIST_WORDS and all(isinstance(w, str) for w in items) and _LAUNCH_HINT.search(items[0]):
            self.launches.extend(launches_in_words(list(items), line))

    def facts(self) -> dict:
        facts = {
            "values": sorted(self.values, key=lambda v: v[2]),
            "launches": sorted(self.launches, key=lambda r: r["line"]),
        }
        if self.capped:
            facts["values_capped"] = True
        return facts


# ------------------------------------------------------------------------------------------ YAML


def _yaml_scalar(node: yaml.ScalarNode):
    build = _SCALAR_BUILDERS.get(node.tag)
    if build is None:
        return node.value  # strings, and any other tag as its text (never constructed)
    try:
        return build(node)
    except (ValueError, TypeError, yaml.YAMLError):
        return node.value


def _yaml_values(text: str, out: _Values) -> None:
    try:
        docs = list(yaml.compose_all(text, Loader=_YAML_LOADER))
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        reason = (e.problem or e.context or "invalid YAML").strip()
        raise ConfigError(f"invalid YAML: {reason}", mark.line + 1 if mark else None) from None
    except yaml.YAMLError as e:
        raise ConfigError(f"invalid YAML: {e}") from None
    budget = _MAX_NODES
    multi = len(docs) > 1
    for number, doc in enumerate(docs):
        stack = [([number] if multi else [], doc, doc.start_mark.line + 1, 0)]
        while stack and not out.full:
            key, node, line, depth = stack.pop()
            budget -= 1
            if budget < 0:
                stack.clear()
            if budget < 0 or depth > _MAX_DEPTH:  # a self-referring alias ends here
                out.capped = True
                continue
            if isinstance(node, yaml.ScalarNode):
                block = node.style in ("|", ">")  # its text starts on the line after the indicator
                out.add(key, _yaml_scalar(node), line, node.start_mark.line + 2 if block else None)
            elif isinstance(node, yaml.SequenceNode):
                items = node.value
                if all(isinstance(n, yaml.ScalarNode) for n in items):
                    out.add_words([n.value for n in items], line)
                for index in range(len(items) - 1, -1, -1):
                    child = items[index]
                    stack.append((key + [index], child, child.start_mark.line + 1, depth + 1))
            elif isinstance(node, yaml.MappingNode):
                children = []
                for k, v in node.value:
                    if k.tag == _YAML + "merge":  # `<<: *base`: the base's keys, here
                        merged = v.value if isinstance(v, yaml.SequenceNode) else [v]
                        for m in merged:
                            if isinstance(m, yaml.MappingNode):
                                children.extend((key + [mk.value], mv, mk.start_mark.line + 1) for mk, mv in m.value
                                                if isinstance(mk, yaml.ScalarNode))
                        continue
                    name = k.value if isinstance(k, yaml.ScalarNode) else "?"
                    children.append((key + [name], v, k.start_mark.line + 1))
                stack.extend((ck, cv, cl, depth + 1) for ck, cv, cl in reversed(children))
        out.capped = out.capped or bool(stack)


# ------------------------------------------------------------------------------------------ JSON

_WS = re.compile(r"[ \t\n\r]*")


class _JsonWalk:
    """Keys and scalar values of valid JSON with their lines (json's scanner reads each scalar)."""

    def __init__(self, text: str, out: _Values) -> None:
        self.s = text
        self.out = out
        self.newlines = [m.start() for m in re.finditer("\n", text)]
        self.scan = json.JSONDecoder().scan_once

    def line(self, pos: int) -> int:
        return bisect.bisect_right(self.newlines, pos - 1) + 1

    def ws(self, i: int) -> int:
        return _WS.match(self.s, i).end()

    def value(self, i: int, key: list, line: int, depth: int) -> int:
        s = self.s
        i = self.ws(i)
        c = s[i]
        if depth > _MAX_DEPTH or self.out.full or c not in "{[":
            obj, end = self.scan(s, i)
            if c not in "{[":
                self.out.add(key, obj, line)
            else:
                self.out.capped = True
            return end
        close = "}" if c == "{" else "]"
        i = self.ws(i + 1)
        if s[i] == close:
            return i + 1
        index = 0
        start = i
        words: list = []
        while True:
            if c == "{":
                name, end = scanstring(s, i + 1)
                i = self.ws(self.ws(end) + 1)  # past the ':'
                i = self.value(i, key + [name], self.line(start), depth + 1)
            else:
                item_start = i
                i = self.value(i, key + [index], self.line(i), depth + 1)
                if len(words) <= _MAX_LIST_WORDS:
                    words.append(s[item_start:i])
            index += 1
            i = self.ws(i)
            if s[i] == ",":
                i = start = self.ws(i + 1)
                continue
            if c == "[" and words and all(w.startswith('"') for w in words):
                self.out.add_words([json.loads(w) for w in words], line)
            return i + 1


def _json_values(text: str, out: _Values) -> None:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"invalid JSON: {e.msg}", e.lineno) from None
    if isinstance(data, list):
        return  # records, not settings (discovery skips these; a file named on the command line lands here)
    _JsonWalk(text, out).value(0, [], 1, 0)


# ------------------------------------------------------------------------------------------ TOML


def _toml_key(raw: str) -> tuple[str, ...]:
    parts = re.findall(r'"((?:[^"\\]|\\.)*)"|\'([^\']*)\'|([^.\s"\']+)', raw)
    return tuple(a or b or c for a, b, c in parts)


def _toml_lines(text: str) -> dict[tuple[str, ...], int]:
    """Best-effort line of each table and key: header paths ([[array]] items numbered) + `key =`."""
    lines: dict[tuple[str, ...], int] = {}
    table: tuple[str, ...] = ()
    counts: dict[tuple[str, ...], int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        s = raw.strip()
        if s.startswith("[[") and "]]" in s:
            name = _toml_key(s[2:s.index("]]")])
            counts[name] = counts.get(name, -1) + 1
            table = name + (str(counts[name]),)
            lines.setdefault(table, number)
        elif s.startswith("[") and "]" in s:
            table = _toml_key(s[1:s.index("]")])
            lines.setdefault(table, number)
        elif "=" in s and not s.startswith("#"):
            lines.setdefault(table + _toml_key(s.split("=", 1)[0]), number)
    return lines


def _toml_values(text: str, out: _Values) -> None:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        m = _TOML_ERROR_LINE.search(str(e))
        raise ConfigError(f"invalid TOML: {str(e).split(' (at ')[0]}", int(m.group(1)) if m else None) from None
    lines = _toml_lines(text)

    def line_of(key: list) -> int:
        path = tuple(map(str, key))
        for end in range(len(path), 0, -1):
            if path[:end] in lines:
                return lines[path[:end]]
        return 1

    stack: list[tuple[list, object]] = [([], data)]
    while stack and not out.full:
        key, value = stack.pop()
        if isinstance(value, dict):
            stack.extend((key + [k], v) for k, v in reversed(list(value.items())))
        elif isinstance(value, list):
            out.add_words(value, line_of(key))
            stack.extend((key + [i], v) for i, v in reversed(list(enumerate(value))))
        else:
            out.add(key, value, line_of(key))
    out.capped = out.capped or bool(stack)


def config_facts(rel: str, text: str) -> dict:
    """{"values": [[key, value, line], ...], "launches": [...]} of one config file; ConfigError
    when it does not parse."""
    out = _Values()
    try:
        if rel.endswith(".json"):
            _json_values(text, out)
        elif rel.endswith(".toml"):
            _toml_values(text, out)
        else:
            _yaml_values(text, out)
    except RecursionError:
        raise ConfigError("nested too deeply to read; skipped", kind="too-complex") from None
    return out.facts()
