"""The whole-report cache: an unchanged tree prints its last report without reading a file, building
the import graph or running the Monte Carlo.

The key covers every input the report depends on. Generic over discovery: every file it yields
is a job and enters with its stat, whatever its kind, together with discovery's own diagnostics.
Everything else is listed in one place, `non_job_inputs` and `key_values` below. A stat that is
within the racy window of the entry's write (stat_index.RACY_NS) makes the entry a miss, and an
entry is not written while any input is that fresh, or when a file's result could not be cached
(a file that timed out may not time out next time).

The report is stored losslessly (every field of model.Report and its parts, JSON types kept, so
it renders byte for byte as built) and validated field by field on reading; entries are sealed
(cachefiles.py). Anything else is a miss.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import json
import os
import types
import typing
from typing import Any, Callable

from .cache import tool_parts
from .cachefiles import CacheFiles
from .catalog import builtin_files
from .config import Settings, display_root
from .discover import Discovery
from .model import Diagnostic, Estimate, Finding, Range, Report, Task
from .stat_index import Stamp, stamp_of

FORMAT = 1
# Files read at the root by reach: submodules decide vendoring, packaging files name console scripts.
ROOT_FILES = (".gitmodules", "pyproject.toml", "setup.cfg", "setup.py", ".git/info/exclude")
# Installed packages whose code shapes the report outside our own (graph order, the Monte Carlo).
LIBRARIES = ("networkx", "numpy")


def non_job_inputs(settings: Settings, found: Discovery) -> list[str]:
    """Every file or directory besides the jobs that the report depends on, as absolute paths:
    configuration and extra catalogs; root files (ROOT_FILES); and each directory holding a job,
    up to the root, with its .gitignore (a directory's stat changes when an entry is added,
    removed or renamed: licence files and package markers that decide vendoring)."""
    root = os.path.abspath(settings.root)
    paths = [str(p) for p in (settings.config_path, *settings.extra_catalogs) if p is not None]
    paths += [os.path.join(root, name) for name in ROOT_FILES]
    dirs = {""}
    for job in found.jobs:
        parts = job.rel.split("/")[:-1]
        for i in range(len(parts)):
            dirs.add("/".join(parts[: i + 1]))
    for d in sorted(dirs):
        base = os.path.join(root, d) if d else root
        paths += [base, os.path.join(base, ".gitignore")]
    return [os.path.abspath(p) for p in paths]


def key_values(settings: Settings) -> dict[str, Any]:
    """What the report depends on that is not a file: the tool, the catalog (the built-in rule
    files' text; extra catalogs are inputs) and every option that shapes the report, and the
    working directory where paths are shown relative to it. The catalog is not loaded: an
    unchanged tree does not pay for parsing it."""
    relative_to_cwd = settings.files is not None or bool(settings.entries)
    return {
        "format": FORMAT,
        "tool": tool_parts(),
        "rules": hashlib.sha256(json.dumps(builtin_files()).encode()).hexdigest(),
        "libraries": [_library_stamp(name) for name in LIBRARIES],
        "options": [settings.target, settings.select, settings.ignore, settings.max_file_size,
                    sorted(settings.per_path_ignores.items()), [str(p) for p in settings.extra_catalogs]],
        "root": os.path.abspath(settings.root),
        "shown_root": display_root(settings),
        "cwd": os.getcwd() if relative_to_cwd else None,
        "explicit_files": settings.files is not None,
        "entries": list(settings.entries),
        "workload": settings.workload,
    }


def _library_stamp(name: str) -> list:
    """Where a library is installed and when it was: an upgrade rewrites the file. Not imported."""
    spec = importlib.util.find_spec(name)
    origin = spec.origin if spec is not None else None
    st = stamp_of(origin) if origin else None
    return [origin, list(st) if st else None]


class ReportKey:
    def __init__(self, settings: Settings, found: Discovery, job_stamps: list[Stamp | None]):
        inputs = non_job_inputs(settings, found)
        input_stamps = [stamp_of(p) for p in inputs]
        self.stamps = [s for s in (*job_stamps, *input_stamps) if s is not None]
        doc = {
            **key_values(settings),
            "jobs": [[j.rel, j.kind, list(s) if s else None] for j, s in zip(found.jobs, job_stamps)],
            "discovery": [d.to_dict() for d in found.diagnostics],
            "inputs": [[p, list(s) if s else None] for p, s in zip(inputs, input_stamps)],
        }
        self.hex = hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()

    def racy(self, written_ns: int) -> bool:
        return any(s.racy(written_ns) for s in self.stamps)


# ------------------------------------------------------------------------------- lossless encoding


def encode_report(report: Report) -> dict[str, Any]:
    return dataclasses.asdict(report)


class _Invalid(Exception):
    pass


def _checker(hint: Any) -> Callable[[Any], Any]:
    """A function taking a value read from JSON to the field type `hint`, or raising _Invalid.
    JSON types are kept as they are (an int stays an int where a float may be), so the report
    renders as it was built. Built once per type: a report has thousands of values."""
    origin = typing.get_origin(hint)
    if hint is Any:
        return lambda v: v
    if origin in (typing.Union, types.UnionType):
        options = [_checker(o) for o in typing.get_args(hint)]

        def union(v: Any) -> Any:
            for check in options:
                try:
                    return check(v)
                except _Invalid:
                    pass
            raise _Invalid(hint)
        return union
    if dataclasses.is_dataclass(hint):
        return lambda v: _decode(hint, v)
    if origin is list:
        item = _checker(typing.get_args(hint)[0])
        return lambda v: [item(x) for x in v] if type(v) is list else _fail(hint)
    if origin is dict:
        item = _checker(typing.get_args(hint)[1])
        return lambda v: {k: item(x) for k, x in v.items()} if type(v) is dict else _fail(hint)
    allowed = (int, float) if hint is float else (hint,)  # bool is not an int here
    return lambda v: v if type(v) in allowed else _fail(hint)


def _fail(hint: Any) -> Any:
    raise _Invalid(hint)


_FIELDS: dict[type, dict[str, Callable[[Any], Any]]] = {}


def _decode(cls: type, value: Any) -> Any:
    if type(value) is not dict:
        raise _Invalid(cls)
    fields = _FIELDS.get(cls)
    if fields is None:
        fields = _FIELDS[cls] = {}
        fields.update((name, _checker(hint)) for name, hint in typing.get_type_hints(cls).items())
    if value.keys() != fields.keys():
        raise _Invalid(cls)
    return cls(**{name: check(value[name]) for name, check in fields.items()})


def decode_report(value: Any) -> Report:
    """Raises _Invalid (or ValueError) unless `value` is a whole, well-typed report."""
    return _decode(Report, value)


# ------------------------------------------------------------------------------------------ store


class ReportCache:
    def __init__(self, files: CacheFiles) -> None:
        self.files = files

    def _path(self, key: ReportKey) -> str:
        return self.files.path(f"reports-v{FORMAT}", key.hex[:2], key.hex)

    def get(self, key: ReportKey) -> Report | None:
        got = self.files.read(self._path(key))
        if got is None:
            return None
        body, written = got
        if key.racy(written):
            return None
        try:
            entry = json.loads(body)
            if entry["format"] != FORMAT or entry["key"] != key.hex:
                return None
            return decode_report(entry["report"])
        except Exception:  # noqa: BLE001 - a foreign or damaged entry is a miss
            return None

    def put(self, key: ReportKey, report: Report, now_ns: int) -> bool:
        if key.racy(now_ns):
            return False  # the next scan writes it, once the inputs are older than the racy window
        body = json.dumps({"format": FORMAT, "key": key.hex, "report": encode_report(report)},
                          separators=(",", ":"), ensure_ascii=False).encode()
        return self.files.write(self._path(key), body)
