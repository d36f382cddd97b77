"""The content cache: a file's scan result stored under a key of everything the result depends on,
so an unchanged file is never parsed twice.

The key hashes the scan context (tool version and the code installed, Python and libcst versions,
the active catalog, target, max-file-size, per-path ignores, the first-party packages that can
matter), the file's kind, its path relative to the root (findings carry it, module names come
from it) and its bytes. A change to any of them is a different key; nothing is ever invalidated.

The bytes enter the key through their SHA-256 (`content_digest`), which the stat index
(stat_index.py) remembers per file, so an unchanged file is neither read nor hashed.

Entries are JSON, never pickle, and sealed (cachefiles.py): a cache directory is input we do not
trust. One file per key, written atomically, so concurrent scans can share a directory. An entry
that is unreadable, corrupt, unsealed or written for another key is a miss, never an error; a
directory that cannot be written turns the cache off for the run with one warning.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from . import __version__
from .cachefiles import CacheFiles
from .catalog import catalog_fingerprint
from .model import Diagnostic, Finding
from .sources import FileJob, FileResult, ScanContext

FORMAT = 4  # bump when the entry layout, the keys or FileResult's meaning change
ENV_DIR = "NEURON_READY_CACHE_DIR"


def default_dir(settings) -> Path:
    """Where the cache lives unless --cache-dir, NEURON_READY_CACHE_DIR or `cache-dir` say otherwise:
    the user's cache directory (XDG), so a scan never writes into the tree it reads. Keys hold the
    path relative to the root and the file's bytes, never the root, so repositories can share it."""
    if settings.cache_dir is not None:
        return Path(settings.cache_dir)
    env = os.environ.get(ENV_DIR)
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "neuron-ready"
    try:
        return Path.home() / ".cache" / "neuron-ready"
    except RuntimeError:  # no home directory (some containers)
        return Path(tempfile.gettempdir()) / f"neuron-ready-cache-{os.getuid()}"


# ------------------------------------------------------------------------------------------- keys


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """A digest of neuron-ready's own source and data files: an edited (editable) install is a new tool."""
    package = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for path in sorted([*package.rglob("*.py"), *package.rglob("*.toml")]):
        h.update(path.relative_to(package).as_posix().encode() + b"\0")
        try:
            h.update(path.read_bytes())
        except OSError:
            pass
    return h.hexdigest()


def relevant_first_party(ctx: ScanContext) -> list[str]:
    """The project's own packages that can change a result: only those named like a package the
    catalog looks for (flash_attn inside flash-attn's own tree). Adding any other package to the
    project leaves every key as it was."""
    from .sources.pyindex import name_roots

    roots = name_roots(ctx.catalog)
    return sorted(ctx.first_party if roots is None else ctx.first_party & roots)


def _libcst_version() -> str:
    """libcst's version without importing it (the main process of a scan may never need it)."""
    spec = importlib.util.find_spec("libcst")
    if spec is not None and spec.origin:
        try:
            return hashlib.sha256((Path(spec.origin).parent / "_version.py").read_bytes()).hexdigest()
        except OSError:
            pass
    import libcst

    return getattr(libcst, "__version__", libcst.__file__)


def tool_parts() -> dict[str, Any]:
    """The tool itself: release, code, and what its parsing depends on."""
    return {
        "format": FORMAT,
        "tool": __version__,
        "code": code_fingerprint(),
        "python": list(sys.version_info[:2]),  # ast's syntax check depends on it
        "libcst": _libcst_version(),
    }


def context_digest(ctx: ScanContext) -> str:
    parts = {
        **tool_parts(),
        "catalog": catalog_fingerprint(ctx.catalog),
        "target": ctx.target,
        "max_file_size": ctx.max_file_size,
        "per_path_ignores": [[p, list(s)] for p, s in ctx.per_path_ignores],
        "first_party": relevant_first_party(ctx),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def content_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Keys:
    """Cache keys for one scan context. Picklable; workers compute keys from the bytes they read."""

    def __init__(self, ctx: ScanContext) -> None:
        self.context = context_digest(ctx)
        self.base = self.context.encode()

    def key(self, job: FileJob, data: bytes) -> str:
        return self.key_of(job, content_digest(data))

    def key_of(self, job: FileJob, digest: str) -> str:
        """The key of a file whose bytes have this content_digest."""
        h = hashlib.sha256(self.base)
        h.update(json.dumps([job.kind, job.rel, digest]).encode())
        return h.hexdigest()


# ------------------------------------------------------------------------------------------ entries


def encode_result(result: FileResult) -> bytes:
    """A FileResult as compact JSON: what a worker sends back and what an entry stores."""
    return json.dumps(
        {
            "rel": result.rel,
            "kind": result.kind,
            "findings": [f.to_dict() for f in result.findings],
            "diagnostics": [d.to_dict() for d in result.diagnostics],
            "suppressed": result.suppressed,
            "parsed": result.parsed,
            "facts": result.facts,
        },
        separators=(",", ":"),
        # ASCII escapes carry what UTF-8 cannot: a string literal `"\ud800"` in scanned code is a
        # lone surrogate in the facts (a default, a registry key) and must round-trip, not kill the worker.
        ensure_ascii=True,
    ).encode()


def decode_result(data: bytes | dict[str, Any]) -> FileResult:
    d = json.loads(data) if isinstance(data, (bytes, str)) else data
    return FileResult(
        rel=d["rel"],
        kind=d["kind"],
        findings=[Finding.from_dict(f) for f in d["findings"]],
        diagnostics=[Diagnostic(x["path"], x["kind"], x["message"], x.get("line")) for x in d["diagnostics"]],
        suppressed=int(d["suppressed"]),
        parsed=bool(d["parsed"]),
        facts=dict(d["facts"]),
    )


class ResultCache:
    def __init__(self, directory: Path) -> None:
        self.files = CacheFiles(directory)
        self.dir = self.files.dir
        self.hits = self.misses = self.rejected = self.writes = 0

    @property
    def error(self) -> str | None:
        """Why writing was given up, for one warning."""
        return self.files.error

    def _path(self, key: str) -> str:
        return self.files.path(f"v{FORMAT}", key[:2], key)

    def get(self, key: str, rel: str) -> FileResult | None:
        got = self.files.read(self._path(key))
        if got is None:
            self.misses += 1
            return None
        try:
            entry = json.loads(got[0])
            if entry["format"] != FORMAT or entry["key"] != key or entry["result"]["rel"] != rel:
                raise ValueError("written for another key")
            result = decode_result(entry["result"])
        except Exception:  # noqa: BLE001 - a foreign entry is a miss; it is rewritten
            self.rejected += 1
            self.misses += 1
            return None
        self.hits += 1
        return result

    def put(self, key: str, payload: bytes) -> None:
        body = b'{"format":%d,"key":"%s","result":' % (FORMAT, key.encode()) + payload + b"}"
        if self.files.write(self._path(key), body):
            self.writes += 1
