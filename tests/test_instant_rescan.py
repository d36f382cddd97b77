"""Instant re-scans (issue 17): the stat index in front of the content cache, the whole-report
cache, and what an unchanged tree or a hook imports. Every report read from a cache must be the
report a scan without the cache gives, byte for byte; every damaged entry is a miss."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import neuron_ready.cache as cache_module
from cli import run_cli
from scanning import write_tree
from neuron_ready.cachefiles import CacheFiles
from neuron_ready.config import Settings
from neuron_ready.engine import find_files, run_scan
from neuron_ready.render import FORMATS, render
from neuron_ready.report_cache import FORMAT as REPORT_FORMAT
from neuron_ready.report_cache import ReportKey
from neuron_ready.stat_index import FORMAT as INDEX_FORMAT
from neuron_ready.stat_index import RACY_NS, Stamp, StatIndex, stamp_of

CUDA_LINE = "import torch\nx = torch.ones(2).cuda()\n"


def _settle() -> None:
    """Wait until files just written are older than the racy window (their ctime cannot be set back)."""
    time.sleep(RACY_NS / 1e9 + 0.1)


def _debug(err: str) -> dict:
    """The NEURON_READY_DEBUG line: (from the cache, scanned, read and hashed, report from the cache)."""
    line = next(x for x in err.splitlines() if "from the cache," in x)
    words = line.replace(";", "").split()
    return {"cached": int(words[words.index("from") - 1]), "scanned": int(words[words.index("scanned") - 1]),
            "hashed": int(words[words.index("read") - 1]), "report": line.endswith("report: from the cache")}


def _scan(*args: str, cache: Path | None = None, cwd=None, fmt: str = "json"):
    extra = ["--cache-dir", str(cache)] if cache is not None else ["--no-cache"]
    return run_cli("scan", *args, "--format", fmt, *extra, cwd=cwd, env={"NEURON_READY_DEBUG": "1"})


def _entries(cache: Path, kind: str) -> list[Path]:
    return sorted(p for p in (cache / kind).rglob("*") if p.is_file() or p.is_symlink())


def test_cold_warm_index_hit_report_hit_and_jobs_1_reports_are_identical(fixtures, tmp_path):
    cache = tmp_path / "cache"
    fresh = _scan(str(fixtures), "--jobs", "1")
    assert fresh.code == 0 and json.loads(fresh.out)["summary"]["findings"] > 20
    files = json.loads(fresh.out)["summary"]["files_scanned"]

    cold = _scan(str(fixtures), "--jobs", "2", cache=cache)
    assert _debug(cold.err) == {"cached": 0, "scanned": files, "hashed": files, "report": False}
    report_hit = _scan(str(fixtures), "--jobs", "2", cache=cache)
    assert _debug(report_hit.err) == {"cached": files, "scanned": 0, "hashed": 0, "report": True}
    shutil.rmtree(cache / f"reports-v{REPORT_FORMAT}")
    index_hit = _scan(str(fixtures), "--jobs", "2", cache=cache)  # every file by its stat, nothing read
    assert _debug(index_hit.err) == {"cached": files, "scanned": 0, "hashed": 0, "report": False}
    shutil.rmtree(cache / f"index-v{INDEX_FORMAT}")
    shutil.rmtree(cache / f"reports-v{REPORT_FORMAT}")
    content_hit = _scan(str(fixtures), "--jobs", "1", cache=cache)  # read and hashed, never parsed
    assert _debug(content_hit.err) == {"cached": files, "scanned": 0, "hashed": files, "report": False}
    for label, r in {"cold": cold, "report hit": report_hit, "index hit": index_hit, "content hit": content_hit}.items():
        assert r.code == 0 and r.out == fresh.out, label

    # Every format renders the cached report as the one just built.
    settings = Settings(root=fixtures, cache_dir=cache)
    cached = run_scan(settings)
    assert cached.stats.report_cached and cached.results == []
    built = run_scan(Settings(root=fixtures, cache=False))
    for fmt in FORMATS:
        assert render(cached.report, fmt, catalog=cached.catalog) == render(built.report, fmt, catalog=built.catalog), fmt


def test_a_file_changed_within_the_same_second_is_seen(tmp_path):
    tree = write_tree(tmp_path / "repo", {"train.py": CUDA_LINE, "other.py": CUDA_LINE})
    settings = Settings(root=tree, cache_dir=tmp_path / "cache", jobs=1)
    first = run_scan(settings)
    assert [f.path for f in first.report.findings] == ["other.py", "train.py"]
    # Rewrite train.py at once, same size, and put its mtime back: size, mtime and inode are as
    # the index recorded them (only ctime moved, and the entry is within the racy window anyway).
    path = tree / "train.py"
    before = os.stat(path)
    path.write_text(CUDA_LINE.replace(".cuda()", "       "), encoding="utf-8")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = stamp_of(str(path))
    assert (after.size, after.mtime_ns, after.ino) == (before.st_size, before.st_mtime_ns, before.st_ino)
    second = run_scan(settings)
    assert [f.path for f in second.report.findings] == ["other.py"]
    assert render(second.report, "json") == render(run_scan(Settings(root=tree, cache=False)).report, "json")


def test_racily_clean_index_entries_are_hashed_again(tmp_path):
    files = CacheFiles(tmp_path / "cache")
    index = StatIndex(files, str(tmp_path))
    now = time.time_ns()
    fresh = Stamp(10, now, 1, now)  # written in the same second as the index
    settled = Stamp(10, now - 2 * RACY_NS, 2, now - 2 * RACY_NS)
    index.record("fresh.py", fresh, "a" * 64)
    index.record("settled.py", settled, "b" * 64)
    index.save()
    again = StatIndex(files, str(tmp_path))
    assert again.digest("settled.py", settled) == "b" * 64
    assert again.digest("settled.py", settled._replace(ctime_ns=settled.ctime_ns + 1)) is None
    assert again.digest("fresh.py", fresh) is None  # read and hashed again by the scan
    assert again.changed  # and the index rewritten, which makes the entry trusted from then on


# Damage to an index or report entry; each must make it a miss. "raw" damages the file (its seal
# no longer checks); "sealed" writes the damaged body with the user's key, so what is behind the
# seal is checked too.
def _damage(body: bytes) -> dict[str, bytes]:
    doc = json.loads(body)
    wrong_types = json.loads(body)
    other_version = dict(doc, format=doc["format"] + 1)
    if "report" in doc:
        wrong_types["report"]["findings"][0]["line"] = "3"
        missing = json.loads(body)
        del missing["report"]["estimate"]["p80"]
        extra = json.loads(body)
        extra["report"]["diagnostics"].append({"path": "x", "kind": "k", "message": "m", "line": None, "more": 1})
        other_key = dict(doc, key="0" * 64)
    else:  # the stat index
        first = next(iter(wrong_types["entries"]))
        wrong_types["entries"][first][0] = "10"
        missing = json.loads(body)
        missing["entries"][first] = missing["entries"][first][:4]
        extra = json.loads(body)
        extra["entries"][first][4] = "../../outside"  # a digest naming a path outside the cache
        other_key = dict(doc, root="/elsewhere")
    return {
        "truncated": body[: len(body) // 2],
        "not json": b"\x00\xff not json",
        "wrong type": b"[]",
        "wrong field types": json.dumps(wrong_types).encode(),
        "missing field": json.dumps(missing).encode(),
        "extra or outside": json.dumps(extra).encode(),
        "another version": json.dumps(other_version).encode(),
        "another key": json.dumps(other_key).encode(),
    }


def _spoil(files: CacheFiles, entry: Path, body: bytes, sealed: bool) -> None:
    if sealed:
        assert files.write(str(entry), body)
    else:
        entry.write_bytes(body)


def test_damaged_report_and_index_entries_are_misses(fixtures, tmp_path):
    cache = tmp_path / "cache"
    settings = Settings(root=fixtures / "mainstream", cache_dir=cache, jobs=1)
    cold = run_scan(settings)
    expected = render(cold.report, "json")
    files = CacheFiles(cache)
    assert run_scan(settings).stats.report_cached
    (report_entry,) = _entries(cache, f"reports-v{REPORT_FORMAT}")
    (index_entry,) = _entries(cache, f"index-v{INDEX_FORMAT}")

    for name, body in _damage(files.read(str(report_entry))[0]).items():
        for sealed in (False, True):
            _spoil(files, report_entry, body, sealed)
            again = run_scan(settings)
            assert not again.stats.report_cached, (name, sealed)
            assert render(again.report, "json") == expected, (name, sealed)
            assert run_scan(settings).stats.report_cached  # written anew

    for name, body in _damage(files.read(str(index_entry))[0]).items():
        for sealed in (False, True):
            _spoil(files, index_entry, body, sealed)
            shutil.rmtree(cache / f"reports-v{REPORT_FORMAT}")
            again = run_scan(settings)
            assert (again.stats.hashed, again.stats.scanned) == (cold.stats.files, 0), (name, sealed)
            assert render(again.report, "json") == expected, (name, sealed)

    # Entries that are symbolic links (to a valid entry's copy outside the cache) are misses.
    for entry in (report_entry, index_entry):
        outside = tmp_path / f"outside-{entry.parent.name}"
        outside.write_bytes(entry.read_bytes())
        entry.unlink()
        entry.symlink_to(outside)
    again = run_scan(settings)
    assert not again.stats.report_cached and again.stats.hashed == cold.stats.files
    assert render(again.report, "json") == expected
    assert not report_entry.is_symlink() and not index_entry.is_symlink()


def test_the_report_key_covers_every_input(fixtures, tmp_path, monkeypatch):
    tree = shutil.copytree(fixtures / "mainstream", tmp_path / "repo")
    write_tree(tree, {"lib/ops.py": CUDA_LINE, "team.toml": ""})
    monkeypatch.chdir(tree)
    settings = Settings(root=tree)
    seen: dict[str, str] = {}

    def key(label: str) -> None:
        found = find_files(settings)
        hex_ = ReportKey(settings, found, [stamp_of(j.path) for j in found.jobs]).hex
        assert hex_ not in seen.values(), f"{label}: the key did not change (as after {seen.get(hex_)})"
        seen[label] = hex_

    key("start")
    found = find_files(settings)
    assert ReportKey(settings, found, [stamp_of(j.path) for j in found.jobs]).hex == seen["start"]  # stable
    changes = {
        "a job's content": lambda: (tree / "lib/ops.py").write_text(CUDA_LINE + "y = 1\n"),
        "a new job": lambda: (tree / "lib/more.py").write_text(CUDA_LINE),
        "a licence file (vendoring)": lambda: (tree / "lib/LICENSE").write_text("MIT"),
        ".gitmodules": lambda: (tree / ".gitmodules").write_text('[submodule "lib"]\n\tpath = lib\n'),
        "a .gitignore": lambda: (tree / "lib/.gitignore").write_text("*.tmp\n"),
        "setup.cfg (console scripts)": lambda: (tree / "setup.cfg").write_text("[options.entry_points]\n"),
        "the config file": lambda: setattr(settings, "config_path", tree / "neuron-ready.toml")
        or (tree / "neuron-ready.toml").write_text("target = 'native'\n"),
        "the config file's content": lambda: (tree / "neuron-ready.toml").write_text("target = 'native'  \n"),
        "an extra catalog": lambda: settings.extra_catalogs.append(tree / "team.toml"),
        "the extra catalog's content": lambda: (tree / "team.toml").write_text("# our rules\n"),
        "target": lambda: setattr(settings, "target", "xla"),
        "select": lambda: settings.select.append("device"),
        "ignore": lambda: settings.ignore.append("NR1001"),
        "max file size": lambda: setattr(settings, "max_file_size", 1000),
        "per-path ignores": lambda: settings.per_path_ignores.update({"lib/*": ["NR1001"]}),
        "entries": lambda: settings.entries.append("train.py"),
        "working directory (entries are relative to it)": lambda: monkeypatch.chdir(tmp_path),
        "workload": lambda: settings.workload.update({"pricing": "on-demand"}),
        "files given one by one": lambda: setattr(settings, "files", [tree / "train.py"]),
        "the tool version": lambda: monkeypatch.setattr(cache_module, "__version__", "9.9.9"),
    }
    for label, change in changes.items():
        change()
        key(label)


def test_a_licence_file_added_after_a_cached_report_is_seen(tmp_path):
    """End to end: the report changes (the folder becomes vendored code) and is not the cached one."""
    tree = write_tree(tmp_path / "repo", {
        "train.py": "import torch\nfrom lib import ops\n\nif __name__ == '__main__':\n    torch.optim.SGD([]).step()\n",
        "lib/ops.py": CUDA_LINE,
    })
    cache = tmp_path / "cache"
    _settle()
    first, cached = _scan(str(tree), cache=cache), _scan(str(tree), cache=cache)
    assert _debug(cached.err)["report"] and cached.out == first.out
    (tree / "lib" / "LICENSE").write_text("Apache-2.0\n")
    after = _scan(str(tree), cache=cache)
    assert not _debug(after.err)["report"]
    assert after.out == _scan(str(tree)).out != first.out
    assert "lib" in json.loads(after.out)["reach"]["vendored"]


def test_two_concurrent_scans_sharing_a_cache_both_report_correctly(fixtures, tmp_path):
    cache = tmp_path / "cache"
    expected = _scan(str(fixtures), "--jobs", "1").out
    env = {**os.environ, "NEURON_READY_CACHE_DIR": str(cache)}
    env.pop("NEURON_READY_DEBUG", None)
    cmd = [sys.executable, "-m", "neuron_ready", "scan", str(fixtures), "--format", "json", "--jobs", "1"]
    for round_ in ("cold", "warm", "warm again"):
        procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
        outs = [p.communicate(timeout=600) for p in procs]
        for p, (out, err) in zip(procs, outs):
            assert p.returncode == 0 and err == b"", (round_, err)
            assert out.decode() == expected, round_


FORBIDDEN_ON_A_CACHED_REPORT = ("libcst", "networkx", "numpy", "multiprocessing", "neuron_ready.report",
                                "neuron_ready.reach", "neuron_ready.workers", "neuron_ready.sources.screen",
                                "neuron_ready.render.html", "rich")


def _imported(args: list[str], cwd: Path, cache: Path) -> tuple[int, set[str]]:
    env = {**os.environ, "NEURON_READY_CACHE_DIR": str(cache)}
    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "neuron_ready", *args], cwd=cwd, env=env,
                       capture_output=True, text=True, timeout=300)
    names = {line.split("|")[-1].strip() for line in p.stderr.splitlines() if line.startswith("import time:")}
    return p.returncode, names


@pytest.mark.parametrize("command", [["hook", "train.py"], ["scan", "train.py"]], ids=["hook", "one-file scan"])
def test_an_unchanged_file_loads_no_parser_graph_or_simulation(tmp_path, command):
    tree = write_tree(tmp_path / "repo", {"train.py": CUDA_LINE, "other.py": "import torch\n"})
    cache = tmp_path / "cache"
    _settle()
    code, first = _imported(command, tree, cache)
    assert code in (0, 1) and "networkx" in first  # the first run builds the report
    code, again = _imported(command, tree, cache)
    assert code in (0, 1)
    assert "neuron_ready.engine" in again
    assert not again & set(FORBIDDEN_ON_A_CACHED_REPORT), sorted(again & set(FORBIDDEN_ON_A_CACHED_REPORT))
