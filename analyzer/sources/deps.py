"""Dependency files: requirements*.txt, pyproject.toml, setup.py, setup.cfg, environment.yml, Pipfile.

Each format is read into Requirement rows with their line, then matched against the catalog's
dependency clauses: GPU-only packages by (PEP 503 normalised) name, and CUDA pins (`+cu121` local
versions, CUDA wheel index URLs, conda CUDA toolkits and the `nvidia` channel). A requirement keeps
the optional extra or dependency group it is listed in (`extra`), so context.py can tell a core
dependency from an opt-in or a development one.
"""

from __future__ import annotations

import fnmatch
import re
import sys
from dataclasses import dataclass, replace
from pathlib import PurePosixPath

from .native import line_finder

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

_CUDA_PIN = re.compile(r"\+cu\d{2,3}\b|/whl/cu\d{2,3}\b|/cu\d{2,3}(/|\b)|cu\d{3}torch|_cuda\d|cuda\d{2,3}x?\b|cuda-?\d{2}\b", re.I)
_URL = re.compile(r"https?://\S+")
_REQ = re.compile(r"^\s*(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*(?P<extras>\[[^\]]*\])?\s*(?P<rest>.*)$")
_CONDA_CUDA = ("pytorch-cuda", "cudatoolkit", "cudatoolkit-dev", "cuda-toolkit", "cuda-nvcc", "cuda-runtime",
               "cuda", "cuda-libraries", "cuda-libraries-dev", "cudnn", "nccl", "magma-cuda*", "cuda-version")

REQUIREMENTS_FILE = re.compile(r"(^|.*[-_.])(requirements|reqs|constraints)([-_.].*)?\.(txt|in)$", re.I)
ENV_FILE = re.compile(r"^(environment|env|conda)([-_.].*)?\.ya?ml$", re.I)


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Requirement:
    line: int
    name: str  # normalised; "" for an index or find-links line
    text: str  # the requirement as written
    cuda_pin: bool
    extra: str = ""  # the optional extra or dependency group it is listed in; "" for a core dependency


def dependency_kind(relpath: str) -> str | None:
    p = PurePosixPath(relpath)
    name = p.name
    if name == "pyproject.toml":
        return "pyproject"
    if name == "setup.cfg":
        return "setup.cfg"
    if name == "setup.py":
        return "setup.py"
    if name == "Pipfile":
        return "pipfile"
    if ENV_FILE.match(name):
        return "conda"
    if REQUIREMENTS_FILE.match(name) or (p.parent.name.lower() in ("requirements", "reqs") and p.suffix in (".txt", ".in")):
        return "requirements"
    return None


def parse_requirement(text: str, line: int) -> Requirement | None:
    """One PEP 508 requirement (or a direct URL to a wheel)."""
    s = text.strip()
    if not s:
        return None
    url = _URL.search(s)
    if s.startswith(("git+", "hg+", "svn+", "bzr+")) or (url and s.startswith(("http://", "https://"))):
        return Requirement(line, normalize(_name_from_url(s)), s, bool(_CUDA_PIN.search(s)))
    m = _REQ.match(s)
    if not m:
        return None
    rest = m.group("rest").split(";", 1)[0]
    return Requirement(line, normalize(m.group("name")), s, bool(_CUDA_PIN.search(rest)))


def _name_from_url(spec: str) -> str:
    """`...#egg=name`, a wheel's file name, or a repository's name (tiny-cuda-nn from its git URL)."""
    egg = re.search(r"[#&]egg=([\w.-]+)", spec)
    if egg:
        return egg.group(1)
    path = spec.split("#", 1)[0].split("?", 1)[0].rstrip("/")
    last = path.rsplit("/", 1)[-1]
    if last.endswith((".whl", ".tar.gz", ".zip")):
        return last.split("-", 1)[0]
    return last.split("@", 1)[0].removesuffix(".git")


def _index_line(text: str, line: int) -> Requirement | None:
    url = _URL.search(text)
    if url:
        return Requirement(line, "", text.strip(), bool(_CUDA_PIN.search(url.group(0))))
    return None


def parse_requirements_txt(text: str) -> list[Requirement]:
    out: list[Requirement] = []
    pending = ""
    start = 0
    for i, raw in enumerate(text.splitlines(), start=1):
        line = re.sub(r"(^|\s)#.*$", "", raw)
        if not pending:
            start = i
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        line = (pending + line).strip()
        pending = ""
        if not line:
            continue
        if line.startswith("-"):
            opt = line.split(None, 1)
            flag = opt[0].split("=", 1)[0]
            if flag in ("-i", "--index-url", "--extra-index-url", "-f", "--find-links"):
                r = _index_line(line, start)
                if r:
                    out.append(r)
            elif flag in ("-e", "--editable") and "#egg=" in line:
                egg = line.split("#egg=", 1)[1].split("&")[0]
                out.append(Requirement(start, normalize(egg), line, bool(_CUDA_PIN.search(line))))
            continue
        r = parse_requirement(line, start)
        if r:
            out.append(r)
    return out


class _LineFinder:
    """Finds the line of a value in a file's text; repeats map to successive lines. Every quoted
    string and every key at the start of a line is indexed once: scanning all lines for each value
    was quadratic (a 1.7 MB pyproject.toml took 46 s). A value not indexed (written with escapes,
    say) falls back to a text search, a bounded number of times."""

    _STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"|\'([^\'\n]*)\'')
    _KEY = re.compile(r'^[ \t]*["\']?([^"\'=\s]+)["\']?[ \t]*=', re.M)
    MAX_SEARCHES = 64

    def __init__(self, text: str) -> None:
        self.text = text
        self.line_of = line_finder(text)
        self.index: dict[str, list[int]] = {}
        for m in self._STRING.finditer(text):
            self._add(m.group(1) if m.group(1) is not None else m.group(2), m.start())
        for m in self._KEY.finditer(text):
            self._add(m.group(1), m.start(1))
        self.used: dict[str, int] = {}
        self.searches = 0

    def _add(self, value: str, pos: int) -> None:
        lines = self.index.setdefault(value, [])
        line = self.line_of(pos)
        if not lines or lines[-1] != line:
            lines.append(line)

    def find(self, needle: str) -> int:
        lines = self.index.get(needle)
        if lines:
            k = self.used.get(needle, 0)
            self.used[needle] = k + 1
            return lines[k] if k < len(lines) else lines[0]
        if self.searches < self.MAX_SEARCHES:
            self.searches += 1
            pos = self.text.find(needle)
            if pos >= 0:
                return self.line_of(pos)
        return 1


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    return []


def _grouped(table) -> list[tuple[str, str]]:
    """(spec, group) for a table of named requirement lists (`[project.optional-dependencies]`)."""
    if not isinstance(table, dict):
        return []
    return [(s, str(group)) for group, value in table.items() for s in _strings(value)]


def parse_pyproject(text: str) -> list[Requirement]:
    data = tomllib.loads(text)  # TOMLDecodeError is reported by the caller as a diagnostic
    finder = _LineFinder(text)
    specs: list[tuple[str, str]] = []
    project = data.get("project", {}) if isinstance(data.get("project"), dict) else {}
    specs += [(s, "") for s in _strings(project.get("dependencies", []))]
    specs += _grouped(project.get("optional-dependencies", {}))
    specs += [(s, "") for s in _strings(data.get("build-system", {}).get("requires", [])
                                        if isinstance(data.get("build-system"), dict) else [])]
    specs += _grouped(data.get("dependency-groups", {}))
    out = [replace(r, extra=extra) for s, extra in specs if (r := parse_requirement(s, finder.find(s))) is not None]
    poetry = data.get("tool", {}).get("poetry", {}) if isinstance(data.get("tool"), dict) else {}
    if isinstance(poetry, dict):
        tables = [(poetry.get("dependencies", {}), ""), (poetry.get("dev-dependencies", {}), "dev")]
        for gname, group in (poetry.get("group", {}) or {}).items():
            if isinstance(group, dict):
                tables.append((group.get("dependencies", {}), str(gname)))
        for table, extra in tables:
            if not isinstance(table, dict):
                continue
            for name, spec in table.items():
                if name.lower() == "python":
                    continue
                line = finder.find(name)
                pin = bool(_CUDA_PIN.search(" ".join(_strings(spec))))
                out.append(Requirement(line, normalize(name), f"{name} = {spec!r}", pin, extra))
    out += _url_lines(text)
    return out


def _url_lines(text: str) -> list[Requirement]:
    """Index and find-links URLs anywhere in a TOML file (uv, poetry, pip and pixi sources)."""
    out = []
    for i, line in enumerate(text.splitlines(), start=1):
        if "url" in line.lower() and not line.lstrip().startswith("#"):
            r = _index_line(line, i)
            if r and r.cuda_pin:
                out.append(r)
    return out


def parse_setup_cfg(text: str) -> list[Requirement]:
    out: list[Requirement] = []
    section = ""
    key = ""
    for i, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip() or raw.lstrip().startswith(("#", ";")):
            continue
        if raw.startswith("["):
            section = raw.strip().strip("[]").strip()
            key = ""
            continue
        if not raw[0].isspace() and "=" in raw:
            key, value = (s.strip() for s in raw.split("=", 1))
        elif raw[0].isspace():
            value = raw.strip()
        else:
            continue
        wanted = (section == "options" and key in ("install_requires", "setup_requires", "tests_require")) or (
            section == "options.extras_require"
        )
        if wanted and value:
            r = parse_requirement(value, i)
            if r:
                extra = key if section == "options.extras_require" else "tests" if key == "tests_require" else ""
                out.append(replace(r, extra=extra))
    return out


def parse_conda(text: str) -> list[Requirement]:
    out: list[Requirement] = []
    block = ""
    pip_indent = None
    for i, raw in enumerate(text.splitlines(), start=1):
        line = re.sub(r"\s#.*$", "", raw).rstrip()
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        indent = len(line) - len(line.lstrip())
        if indent == 0 and line.endswith(":"):
            block = line[:-1].strip()
            pip_indent = None
            continue
        item = line.strip()
        if not item.startswith("- "):
            continue
        item = item[2:].strip().strip("'\"")
        if pip_indent is not None and indent <= pip_indent:
            pip_indent = None
        if block == "channels":
            if item in ("nvidia",) or "nvidia" in item:
                out.append(Requirement(i, "", f"channel {item}", True))
            continue
        if block != "dependencies":
            continue
        if item.rstrip(":") == "pip" and item.endswith(":"):
            pip_indent = indent
            continue
        if pip_indent is not None:
            r = parse_requirement(item, i) if not item.startswith("-") else _index_line(item, i)
            if r:
                out.append(r)
            continue
        spec = item.split("::", 1)[-1]
        name = re.split(r"[=<>!\s\[]", spec, maxsplit=1)[0]
        conda_cuda = any(fnmatch.fnmatchcase(normalize(name), g) for g in _CONDA_CUDA)
        out.append(Requirement(i, normalize(name), item, conda_cuda or "cuda" in spec[len(name):].lower()))
    return out


def parse_pipfile(text: str) -> list[Requirement]:
    data = tomllib.loads(text)
    finder = _LineFinder(text)
    out = []
    for table in ("packages", "dev-packages"):
        for name, spec in (data.get(table, {}) or {}).items():
            pin = bool(_CUDA_PIN.search(" ".join(_strings(spec))))
            out.append(Requirement(finder.find(name), normalize(name), f"{name} = {spec!r}", pin,
                                   "dev" if table == "dev-packages" else ""))
    out += _url_lines(text)
    return out


def parse_dependencies(kind: str, text: str, setup_requirements: list[tuple] | None = None) -> list[Requirement]:
    if kind == "requirements":
        return parse_requirements_txt(text)
    if kind == "pyproject":
        return parse_pyproject(text)
    if kind == "setup.cfg":
        return parse_setup_cfg(text)
    if kind == "conda":
        return parse_conda(text)
    if kind == "pipfile":
        return parse_pipfile(text)
    if kind == "setup.py":
        # (line, requirement[, extra]): setup.py's extras_require keys and tests_require name the extra
        reqs = [replace(r, extra=str(rest[0]) if rest else "")
                for line, s, *rest in (setup_requirements or []) if (r := parse_requirement(s, line)) is not None]
        return reqs + [r for r in _url_lines(text) if r.cuda_pin]
    return []


def match_requirements(reqs: list[Requirement], entries: list) -> list[tuple[object, object, Requirement]]:
    hits = []
    seen = set()
    # each clause's names normalised once: exact names in a set, globs apart (linear in the requirements)
    prepared = []
    for rule, clause in entries:
        names = {normalize(p) for p in clause.packages}
        globs = [n for n in names if any(c in n for c in "*?[")]
        prepared.append((rule, clause, names.difference(globs), globs))
    for req in reqs:
        for rule, clause, names, globs in prepared:
            ok = (clause.cuda_pin and req.cuda_pin) or (
                req.name and (req.name in names or any(fnmatch.fnmatchcase(req.name, g) for g in globs))
            )
            if ok and (rule.id, req.line) not in seen:
                seen.add((rule.id, req.line))
                hits.append((rule, clause, req))
    return hits
