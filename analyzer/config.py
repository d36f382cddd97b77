"""Settings: `[tool.neuron-ready]` in pyproject.toml (or a neuron-ready.toml) merged with CLI flags.

Every problem is a ConfigError whose text is one line: `FILE:LINE: what is wrong`. The CLI turns it
into exit code 2.
"""

from __future__ import annotations

import difflib
import math
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .catalog import not_a_selector, valid_selector
from .model import CATEGORIES, EFFORT_CLASSES, TARGETS, reported_path
from .tomlcheck import TomlSyntaxError, did_you_mean, parse, unknown_keys

TOOL = "neuron-ready"
CONFIG_FILES = ("neuron-ready.toml", ".neuron-ready.toml", "pyproject.toml")
KEYS = (
    "target", "select", "ignore", "exclude", "per-path-ignores", "extra-catalogs", "max-file-size",
    "respect-gitignore", "fail-on", "entry", "include-opt-in", "jobs", "cache", "cache-dir", "workload",
)
WORKLOAD_KEYS = (
    "gpu-instance", "trainium-instance", "gpu-price", "trainium-price", "gpu-instances", "trainium-instances",
    "pricing", "gpu-hours-per-run", "relative-throughput", "runs-per-month", "day-rate", "person-days",
    "horizon-months",
)
PRICINGS = ("on-demand", "reserved-1yr", "reserved-3yr", "spot")
_WORKLOAD_COUNTS = ("gpu-instances", "trainium-instances")
_WORKLOAD_NAMES = ("gpu-instance", "trainium-instance")
DEFAULT_MAX_FILE_SIZE = 2 * 1024 * 1024


class ConfigError(Exception):
    """A one-line, user-facing configuration problem."""


@dataclass
class Settings:
    root: Path = Path(".")
    files: list[Path] | None = None  # explicit files (pre-commit); None = walk root
    target: str = "native"
    target_from: str = ""  # what chose the target: "--target", the config file, or a torch-neuronx pin
    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    per_path_ignores: dict[str, list[str]] = field(default_factory=dict)
    extra_catalogs: list[Path] = field(default_factory=list)
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    respect_gitignore: bool = True
    fail_on: list[str] = field(default_factory=list)
    entries: list[str] = field(default_factory=list)
    include_opt_in: list[str] = field(default_factory=list)  # opt-in features costed with the must-port part ("all")
    jobs: int = 0  # 0 = all cores
    # `jobs` came from the scanned tree's config: 1 then still scans in a worker (timeout, crash
    # isolation); only --jobs 1 or NEURON_READY_JOBS=1, the user's own choice, scan in-process
    jobs_from_config: bool = False
    cache: bool = True
    cache_dir: Path | None = None
    workload: dict[str, Any] = field(default_factory=dict)
    config_path: Path | None = None
    assume_fixed: bool = False  # cost what `neuron-ready fix` rewrites (safe fixes) as done


def display_root(settings: Settings) -> str:
    """The root as the user named it, relative to the working directory when inside it."""
    root = os.path.abspath(settings.root)
    rel = os.path.relpath(root)
    return reported_path((rel if not rel.startswith("..") else root).replace(os.sep, "/"))


@dataclass
class RawConfig:
    path: Path
    text: str
    table: dict[str, Any]
    standalone: bool  # neuron-ready.toml (top-level keys) rather than pyproject's tool table

    def line_of(self, key: str | None = None, subtable: str | None = None) -> int:
        """Best-effort line of a key (or a sub-table header) in the file, for error messages."""
        lines = self.text.splitlines()
        header = None if self.standalone else re.compile(r"^\s*\[\s*tool\s*\.\s*[\"']?neuron-ready[\"']?\s*[\].]")
        start = 0
        if header is not None:
            for i, line in enumerate(lines):
                if header.match(line):
                    start = i
                    break
        if subtable:
            rx = re.compile(r"^\s*\[.*" + re.escape(subtable) + r"[\"']?\s*\]")
            for i in range(start, len(lines)):
                if rx.match(lines[i]):
                    return i + 1
        if key:
            rx = re.compile(r"^\s*[\"']?" + re.escape(key) + r"[\"']?\s*=")
            for i in range(start, len(lines)):
                if rx.match(lines[i]):
                    return i + 1
        return start + 1

    def error(self, problem: str, key: str | None = None, subtable: str | None = None) -> ConfigError:
        where = f"[tool.{TOOL}]" if not self.standalone else ""
        prefix = f"{where} " if where else ""
        return ConfigError(f"{self.path}:{self.line_of(key, subtable)}: {prefix}{problem}")


def find_config(start: Path) -> Path | None:
    """The nearest config at `start` or above it, stopping at a repository root."""
    d = start.resolve()
    if d.is_file():
        d = d.parent
    while True:
        for name in CONFIG_FILES:
            p = d / name
            if p.is_file():
                if name != "pyproject.toml":
                    return p
                try:
                    if re.search(r"^[ \t]*\[[ \t]*tool[ \t]*\.[ \t]*[\"']?neuron-ready", p.read_text(encoding="utf-8", errors="replace"), re.M):
                        return p
                except OSError:
                    pass
        if (d / ".git").exists() or d.parent == d:
            return None
        d = d.parent


def read_config(path: Path) -> RawConfig:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"{path}:1: cannot read config: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}:1: config is not UTF-8 text") from None
    try:
        data = parse(text)
    except TomlSyntaxError as e:
        raise ConfigError(f"{path}:{e.line}: invalid TOML: {e.problem}") from None
    standalone = path.name != "pyproject.toml"
    table = data if standalone else data.get("tool", {}).get(TOOL, {})
    raw = RawConfig(path, text, table if isinstance(table, dict) else {}, standalone)
    if not isinstance(table, dict):
        raise raw.error("must be a table")
    return raw


def _strings(raw: RawConfig, key: str, value: Any) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise raw.error(f"{key}: expected a list of strings, got {value!r}", key)
    return list(value)


def _selectors(raw: RawConfig, key: str, value: Any, subtable: str | None = None) -> list[str]:
    out = _strings(raw, key, value)
    for s in out:
        if not valid_selector(s):
            raise raw.error(f"{key}: {not_a_selector(s)}", key, subtable)
    return out


def parse_size(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    if isinstance(value, str):
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgG]i?[bB]?|[bB])?\s*", value)
        if m:
            unit = (m.group(2) or "b").lower().rstrip("b").rstrip("i")
            mult = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}[unit]
            n = int(float(m.group(1)) * mult)
            if n > 0:  # a limit of 0 bytes would skip every file and leave nothing analysed
                return n
    raise ValueError(f"expected a size above 0 like 2000000, '500KiB' or '2MiB', got {value!r}")


def glob_problem(patterns: list[str]) -> str | None:
    """Why a gitignore-style pattern cannot be used (e.g. the range in '**/[z-a]'), or None."""
    import pathspec  # as discover.py reads them

    for p in patterns:
        try:
            pathspec.GitIgnoreSpec.from_lines([p])
        except (ValueError, re.error) as e:
            return f"{p!r} is not a valid gitignore-style pattern ({e})"
    return None


def check_fail_on(values: list[str]) -> list[str]:
    for v in values:
        if v not in EFFORT_CLASSES and v != "any" and not valid_selector(v):
            close = difflib.get_close_matches(v.lower(), [*EFFORT_CLASSES, "any", *CATEGORIES], n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ValueError(f"{v!r} is not an effort class ({', '.join(EFFORT_CLASSES)}), 'any', a rule id, prefix or category{hint}")
    return values


def apply_config(settings: Settings, raw: RawConfig) -> None:
    t = raw.table
    for key in unknown_keys(t, KEYS)[:1]:
        raise raw.error(f"unknown key '{key}'{did_you_mean(key, KEYS)}", key)
    base = raw.path.parent
    if "target" in t:
        if t["target"] not in TARGETS:
            raise raw.error(f"target: expected one of {', '.join(TARGETS)}, got {t['target']!r}", "target")
        settings.target, settings.target_from = t["target"], raw.path.name
    if "select" in t:
        settings.select = _selectors(raw, "select", t["select"])
    if "ignore" in t:
        settings.ignore = _selectors(raw, "ignore", t["ignore"])
    if "exclude" in t:
        settings.exclude = _strings(raw, "exclude", t["exclude"])
        problem = glob_problem(settings.exclude)
        if problem:
            raise raw.error(f"exclude: {problem}", "exclude")
    if "per-path-ignores" in t:
        ppi = t["per-path-ignores"]
        if not isinstance(ppi, dict):
            raise raw.error("per-path-ignores: expected a table of glob = [rule selectors]", "per-path-ignores")
        settings.per_path_ignores = {
            pattern: _selectors(raw, pattern, sel, "per-path-ignores") for pattern, sel in ppi.items()
        }
        problem = glob_problem(list(ppi))
        if problem:
            raise raw.error(f"per-path-ignores: {problem}", None, "per-path-ignores")
    if "extra-catalogs" in t:
        paths = [base / p for p in _strings(raw, "extra-catalogs", t["extra-catalogs"])]
        for p in paths:
            if not p.is_file():
                raise raw.error(f"extra-catalogs: no such file: {p}", "extra-catalogs")
        settings.extra_catalogs = paths
    if "max-file-size" in t:
        try:
            settings.max_file_size = parse_size(t["max-file-size"])
        except ValueError as e:
            raise raw.error(f"max-file-size: {e}", "max-file-size") from None
    if "respect-gitignore" in t:
        if not isinstance(t["respect-gitignore"], bool):
            raise raw.error("respect-gitignore: expected true or false", "respect-gitignore")
        settings.respect_gitignore = t["respect-gitignore"]
    if "fail-on" in t:
        try:
            settings.fail_on = check_fail_on(_strings(raw, "fail-on", t["fail-on"]))
        except ValueError as e:
            raise raw.error(f"fail-on: {e}", "fail-on") from None
    if "entry" in t:
        settings.entries = _strings(raw, "entry", t["entry"])
    if "include-opt-in" in t:
        settings.include_opt_in = _strings(raw, "include-opt-in", t["include-opt-in"])
    if "jobs" in t:
        j = t["jobs"]
        if not isinstance(j, int) or isinstance(j, bool) or j < 0:
            raise raw.error("jobs: expected a whole number (0 = all cores)", "jobs")
        settings.jobs, settings.jobs_from_config = j, True
    if "cache" in t:
        if not isinstance(t["cache"], bool):
            raise raw.error("cache: expected true or false", "cache")
        settings.cache = t["cache"]
    if "cache-dir" in t:
        if not isinstance(t["cache-dir"], str):
            raise raw.error("cache-dir: expected a path", "cache-dir")
        settings.cache_dir = _config_cache_dir(raw, base / os.path.expanduser(t["cache-dir"]), settings.root)
    if "workload" in t:
        w = t["workload"]
        if not isinstance(w, dict):
            raise raw.error("workload: expected a table", "workload")
        for key in w:
            if key not in WORKLOAD_KEYS:
                raise raw.error(f"workload: unknown key '{key}'{did_you_mean(key, WORKLOAD_KEYS)}", key, "workload")
            problem = workload_problem(key, w[key])
            if problem:
                raise raw.error(f"workload: {key}: {problem}", key)
        settings.workload = dict(w)
    settings.config_path = raw.path


def workload_error(settings: Settings, error: ConfigError) -> ConfigError:
    """A break-even input problem met while scanning, pointed at the workload table of the config
    (flags cannot fix a scan's workload: its keys can)."""
    if settings.config_path is None:
        return error
    raw = read_config(settings.config_path)
    return raw.error(f"workload: {error}", None, "workload")


# Far beyond any real price, hour count or fleet, and far enough from float limits that every cost
# and break-even computed from them stays finite.
WORKLOAD_MIN, WORKLOAD_MAX = 1e-6, 1e9


def workload_problem(key: str, value: Any) -> str | None:
    """Why a [tool.neuron-ready.workload] value cannot be used, or None."""
    if key in _WORKLOAD_NAMES:
        return None if isinstance(value, str) and value else f"expected an instance name, got {value!r}"
    if key == "pricing":
        return None if value in PRICINGS else f"expected one of {', '.join(PRICINGS)}, got {value!r}"
    if key == "day-rate":
        return number_problem(value, positive=False, minimum=0.0)
    return number_problem(value, integer=key in _WORKLOAD_COUNTS)


def number_problem(value: Any, *, integer: bool = False, positive: bool = True, minimum: float | None = None) -> str | None:
    """Why `value` is not a usable workload number, or None: one rule for config values and flags."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return f"expected a number, got {value!r}"
    if abs(value) > WORKLOAD_MAX or 0 < abs(value) < WORKLOAD_MIN:  # 1e308 made costs inf and savings nan
        return f"must be between {WORKLOAD_MIN:g} and {WORKLOAD_MAX:g}, got {value!r}"
    if integer and (value != int(value) or value < 1):
        return f"expected a whole number >= 1, got {value!r}"
    if positive and value <= 0:
        return f"must be greater than 0, got {value!r}"
    if minimum is not None and value < minimum:
        return f"must be at least {minimum:g}, got {value!r}"
    return None


def user_cache_home() -> Path:
    """$XDG_CACHE_HOME, else ~/.cache: where a configuration file may put neuron-ready's cache."""
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        return Path(xdg)
    try:
        return Path.home() / ".cache"
    except RuntimeError:  # no home directory
        return Path(tempfile.gettempdir())


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _config_cache_dir(raw: RawConfig, wanted: Path, root: Path) -> Path:
    """A configuration file travels with the tree it configures, so it may not aim the cache (files
    we write, and read back as results) anywhere else than the user's cache directory, and never
    into the scanned tree. --cache-dir and NEURON_READY_CACHE_DIR may name any folder."""
    real = os.path.realpath(wanted)
    if os.environ.get("NEURON_READY_CACHE_DIR"):
        return Path(real)  # the environment's choice wins (load_settings); this one is never used
    home = os.path.realpath(user_cache_home())
    if not _inside(real, home) or _inside(real, os.path.realpath(root)) or _inside(real, os.path.realpath(raw.path.parent)):
        raise raw.error(f"cache-dir: a configuration file may only choose a folder inside {home}, outside the "
                        "scanned tree (use --cache-dir or NEURON_READY_CACHE_DIR for another place)", "cache-dir")
    return Path(real)


def load_settings(root: Path, config: Path | None = None, isolated: bool = False) -> Settings:
    """Settings for scanning `root`: defaults, then the config file (found or given)."""
    settings = Settings(root=root)
    path = config if config is not None else (None if isolated else find_config(root))
    if path is not None:
        if not path.exists():
            raise ConfigError(f"{path}:1: config file not found")
        apply_config(settings, read_config(path))
    env_jobs = os.environ.get("NEURON_READY_JOBS")
    if env_jobs and env_jobs.isdigit():
        settings.jobs, settings.jobs_from_config = int(env_jobs), False
    env_cache = os.environ.get("NEURON_READY_CACHE_DIR")
    if env_cache:
        settings.cache_dir = Path(env_cache)
    return settings
