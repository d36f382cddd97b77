"""Worker processes, the content cache and progress: the report never depends on how it was made,
an unchanged file is never scanned twice, and one bad file costs only that file."""

from __future__ import annotations

import json
import os
import pty
import resource
import select
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cli import run_cli
from scanning import write_tree
from neuron_ready.cache import FORMAT, decode_result, encode_result
from neuron_ready.cachefiles import CacheFiles
from neuron_ready.report_cache import FORMAT as REPORT_FORMAT
from neuron_ready.catalog import load_catalog
from neuron_ready.config import Settings
from neuron_ready.discover import discover
from neuron_ready.engine import run_scan
from neuron_ready.render import render
from neuron_ready.sources import FileJob, ScanContext, scan_file

CUDA_LINE = "import torch\nx = torch.ones(2).cuda()\n"
# Real inputs that break libcst's native parser: a chain of `not` deep enough to overflow its
# stack (the process dies with SIGSEGV), and a long `+` chain it parses in quadratic time (about
# 10 s here; the tests allow it 1 s of CPU). Both pass Python's own checks for deep nesting, and
# both sit inside brackets: as backslash continuations they would be a nesting risk that CPython's
# parser judges first (sources.nesting_risk), and never reach libcst.
CRASHES_LIBCST = CUDA_LINE + "y = (" + "not\n" * 30000 + "x)\n"
HANGS_LIBCST = CUDA_LINE + "y = (1\n" + "+ 1\n" * 6000 + ")\n"


def _stack_8mib() -> None:
    """The crash needs a bounded stack (8 MiB is Linux's default; CI may say unlimited)."""
    resource.setrlimit(resource.RLIMIT_STACK, (8 << 20, 8 << 20))


def _scan_json(*args: str, env: dict | None = None):
    return run_cli("scan", *args, "--format", "json", env={"NEURON_READY_DEBUG": "1", **(env or {})})


def _counts(err: str) -> tuple[int, int]:
    """(from the cache, scanned) from the NEURON_READY_DEBUG line on stderr."""
    line = next(x for x in err.splitlines() if "from the cache" in x)
    words = line.split()
    return int(words[words.index("from") - 1]), int(words[words.index("scanned") - 1])


def test_the_report_is_the_same_whatever_the_workers_and_the_cache(fixtures, tmp_path):
    cache = str(tmp_path / "cache")
    runs = {
        "jobs 1, no cache": _scan_json(str(fixtures), "--jobs", "1", "--no-cache"),
        "jobs 2, no cache": _scan_json(str(fixtures), "--jobs", "2", "--no-cache"),
        "jobs 2, cold": _scan_json(str(fixtures), "--jobs", "2", "--cache-dir", cache),
        "jobs 2, warm": _scan_json(str(fixtures), "--jobs", "2", "--cache-dir", cache),
        "jobs 1, warm": _scan_json(str(fixtures), "--jobs", "1", "--cache-dir", cache),
    }
    for label, r in runs.items():
        assert r.code == 0, (label, r.err)
    first = runs["jobs 1, no cache"].out
    assert json.loads(first)["summary"]["findings"] > 20
    for label, r in runs.items():
        assert r.out == first, label
    files = json.loads(first)["summary"]["files_scanned"]
    assert _counts(runs["jobs 2, cold"].err) == (0, files)
    assert _counts(runs["jobs 2, warm"].err) == (files, 0)
    assert _counts(runs["jobs 1, warm"].err) == (files, 0)
    text = [run_cli("scan", str(fixtures), "--no-color", *extra).out
            for extra in (["--jobs", "1", "--no-cache"], ["--jobs", "2", "--cache-dir", cache])]
    assert text[0] == text[1] and "Readiness" in text[0]


def test_only_a_changed_file_is_scanned_again(fixtures, tmp_path):
    tree = shutil.copytree(fixtures / "mainstream", tmp_path / "repo")
    settings = Settings(root=tree, cache_dir=tmp_path / "cache")
    cold = run_scan(settings)
    assert cold.stats.scanned == cold.stats.files > 3 and cold.stats.cached == 0

    # An unchanged file comes from the cache: edit its entry (sealed again with this user's key,
    # as the scan would) and the edit shows in the report.
    files = CacheFiles(tmp_path / "cache")
    (entry,) = [p for p in (tmp_path / "cache" / f"v{FORMAT}").rglob("*")
                if p.is_file() and b'"rel":"train.py"' in p.read_bytes()]
    body, _ = files.read(str(entry))
    assert files.write(str(entry), body.replace(b"moves a tensor", b"MOVES A TENSOR"))
    # A changed file is scanned again: its new line is found.
    (tree / "data.py").write_text((tree / "data.py").read_text() + "\n" + CUDA_LINE, encoding="utf-8")

    warm = run_scan(settings)
    assert (warm.stats.cached, warm.stats.scanned) == (cold.stats.files - 1, 1)
    messages = [f.message for f in warm.report.findings if f.path == "train.py"]
    assert any("MOVES A TENSOR" in m for m in messages)
    new = [f for f in warm.report.findings if f.path == "data.py" and f.rule == "NR1001"]
    old = [f for f in cold.report.findings if f.path == "data.py" and f.rule == "NR1001"]
    assert len(new) == len(old) + 1


def _forget_reports(cache: Path) -> None:
    """Drop the whole-report entries, so the next scan goes through the per-file cache."""
    shutil.rmtree(cache / f"reports-v{REPORT_FORMAT}", ignore_errors=True)


# Damage done to a result entry; each must make it a miss. Applied to the raw file (the seal no
# longer checks) and to the body, sealed again with the user's key (what is behind the seal is checked too).
DAMAGE = {
    "truncated": lambda b, other: b[: len(b) // 2],
    "not json": lambda b, other: b"\x00\xff not json",
    "wrong type": lambda b, other: b"[]",
    "another key": lambda b, other: other,
    "another version": lambda b, other: b.replace(b'"format":%d' % FORMAT, b'"format":99'),
    "bad finding": lambda b, other: b.replace(b'"findings":[', b'"findings":[{"rule": 1},'),
}


@pytest.mark.parametrize("sealed", [False, True], ids=["raw", "resealed"])
def test_a_corrupt_or_foreign_cache_entry_is_a_miss(fixtures, tmp_path, sealed):
    cache = tmp_path / "cache"
    files = CacheFiles(cache)
    tree = write_tree(tmp_path / "repo", {f"m{i}.py": CUDA_LINE * (i + 1) for i in range(len(DAMAGE))})
    settings = Settings(root=tree, cache_dir=cache, jobs=1)
    cold = run_scan(settings)
    entries = sorted(p for p in (cache / f"v{FORMAT}").rglob("*") if p.is_file())
    assert len(entries) == cold.stats.files == len(DAMAGE)
    bodies = [files.read(str(p))[0] for p in entries]
    for n, (entry, spoil) in enumerate(zip(entries, DAMAGE.values())):
        if sealed:
            files.write(str(entry), spoil(bodies[n], bodies[n - 1]))
        else:
            entry.write_bytes(spoil(entry.read_bytes(), entries[n - 1].read_bytes()))
    _forget_reports(cache)
    again = run_scan(settings)
    assert again.stats.scanned == len(entries)
    assert render(again.report, "json") == render(cold.report, "json")
    _forget_reports(cache)
    assert run_scan(settings).stats.cached == cold.stats.files  # the entries were written anew


def test_entries_outside_the_cache_or_under_a_foreign_key_are_misses(fixtures, tmp_path):
    cache = tmp_path / "cache"
    settings = Settings(root=fixtures / "mainstream", cache_dir=cache, jobs=1)
    cold = run_scan(settings)
    entries = sorted(p for p in (cache / f"v{FORMAT}").rglob("*") if p.is_file())
    # An entry that is a symbolic link to a file outside the directory, even a valid entry's copy.
    outside = tmp_path / "outside"
    outside.write_bytes(entries[0].read_bytes())
    entries[0].unlink()
    entries[0].symlink_to(outside)
    _forget_reports(cache)
    again = run_scan(settings)
    assert (again.stats.cached, again.stats.scanned) == (cold.stats.files - 1, 1)
    assert render(again.report, "json") == render(cold.report, "json")
    assert not entries[0].is_symlink()  # replaced by a real entry

    # A key file others can read (as a checkout or an archive would leave it) is not ours: every
    # entry is a miss, and the scan makes a private key.
    key = cache / "key"
    key.chmod(0o644)
    _forget_reports(cache)
    again = run_scan(settings)
    assert again.stats.scanned == cold.stats.files
    assert key.stat().st_mode & 0o077 == 0
    assert render(again.report, "json") == render(cold.report, "json")


def test_an_unusable_cache_directory_is_one_warning(fixtures, tmp_path):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("x")
    r = run_cli("scan", str(fixtures / "mainstream"), "--format", "json", "--cache-dir", str(blocker / "cache"))
    assert r.code == 0
    assert json.loads(r.out)["summary"]["findings"] > 0
    (warning,) = r.err.splitlines()
    assert warning.startswith("neuron-ready: warning: cannot write the cache in ") and "continuing without it" in warning
    quiet = run_cli("scan", str(fixtures / "mainstream"), "-q", "--cache-dir", str(blocker / "cache"))
    assert quiet.code == 0 and quiet.err == ""


def test_where_the_cache_lives(fixtures, tmp_path):
    home = tmp_path / "xdg"
    env = {"NEURON_READY_CACHE_DIR": "", "XDG_CACHE_HOME": str(home)}  # as if unset: the default location
    repo = shutil.copytree(fixtures / "mainstream", tmp_path / "repo")
    before = sorted(p.relative_to(repo) for p in repo.rglob("*"))
    assert run_cli("scan", str(repo), env=env).code == 0
    cache = home / "neuron-ready"
    assert (cache / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")
    assert (cache / ".gitignore").read_text().splitlines()[-1] == "*"
    assert sorted(p.relative_to(repo) for p in repo.rglob("*")) == before  # nothing written in the tree
    again = run_cli("scan", str(repo), "--format", "json", env={**env, "NEURON_READY_DEBUG": "1"})
    assert _counts(again.err)[1] == 0  # nothing scanned again

    # `cache-dir` in the configuration is relative to it (or to ~) and must stay inside the user's
    # cache directory; the environment variable overrides it; `cache = false` writes nothing.
    (repo / "pyproject.toml").write_text('[tool.neuron-ready]\ncache-dir = "../xdg/ours"\n')
    assert run_cli("scan", str(repo), env=env).code == 0
    assert (home / "ours" / "CACHEDIR.TAG").is_file()
    elsewhere = tmp_path / "elsewhere"
    assert run_cli("scan", str(repo), env={"NEURON_READY_CACHE_DIR": str(elsewhere)}).code == 0
    assert (elsewhere / "CACHEDIR.TAG").is_file()
    shutil.rmtree(home)
    (repo / "pyproject.toml").write_text('[tool.neuron-ready]\ncache = false\ncache-dir = "../xdg/ours"\n')
    assert run_cli("scan", str(repo), env=env).code == 0
    assert not home.exists()


@pytest.mark.parametrize("where", ["", ".", "build/nr", "../victim", "/tmp/nr-anywhere"])
def test_a_repository_config_may_not_aim_the_cache_anywhere(fixtures, tmp_path, where):
    """`cache-dir = ""` put a .gitignore of `*` in the repository root (the next scan saw 0 files);
    `../../victim` wrote anywhere. Only a flag or the environment may choose such a place."""
    home = tmp_path / "xdg"
    env = {"NEURON_READY_CACHE_DIR": "", "XDG_CACHE_HOME": str(home)}
    repo = shutil.copytree(fixtures / "mainstream", tmp_path / "repo")
    (repo / "pyproject.toml").write_text(f'[tool.neuron-ready]\ncache-dir = "{where}"\n')
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    r = run_cli("scan", str(repo), env=env)
    assert r.code == 2 and r.err.startswith(f"neuron-ready: error: {repo / 'pyproject.toml'}:2: ")
    assert "cache-dir: a configuration file may only choose a folder inside" in r.err
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    flag = tmp_path / "chosen"
    assert run_cli("scan", str(repo), "--isolated", "--cache-dir", str(flag), env=env).code == 0
    assert (flag / "CACHEDIR.TAG").is_file()


def test_jobs_1_from_a_repository_config_keeps_worker_isolation(fixtures, tmp_path):
    repo = shutil.copytree(fixtures / "mainstream", tmp_path / "repo")
    (repo / "pyproject.toml").write_text("[tool.neuron-ready]\njobs = 1\n")
    debug = {"NEURON_READY_DEBUG": "1"}
    r = run_cli("scan", str(repo), "--no-cache", env=debug)
    assert r.code == 0 and "(1 worker processes)" in r.err, r.err
    flag = run_cli("scan", str(repo), "--no-cache", "--jobs", "1", env=debug)  # the user's own choice
    assert flag.code == 0 and "(0 worker processes)" in flag.err, flag.err
    assert r.out == flag.out


def test_no_cache_writes_nothing(fixtures, tmp_path):
    home = tmp_path / "xdg"
    env = {"NEURON_READY_CACHE_DIR": "", "XDG_CACHE_HOME": str(home)}
    for jobs in ("1", "2"):
        r = run_cli("scan", str(fixtures / "mainstream"), "--no-cache", "--jobs", jobs, env=env)
        assert r.code == 0 and "Readiness" in r.out
    named = tmp_path / "named"
    assert run_cli("scan", str(fixtures / "mainstream"), "--no-cache", "--cache-dir", str(named), env=env).code == 0
    assert not home.exists() and not named.exists()


@pytest.mark.parametrize("how", [["--jobs", "2"], ["--jobs", "1"]], ids=["workers", "isolated-jobs-1"])
def test_a_file_that_crashes_or_hangs_the_parser_costs_only_that_file(tmp_path, how):
    tree = write_tree(tmp_path / "repo", {
        "crash.py": CRASHES_LIBCST,
        "slow.py": HANGS_LIBCST,
        **{f"pkg/m{i}.py": CUDA_LINE for i in range(6)},
    })
    env = {"NEURON_READY_FILE_TIMEOUT": "1", "NEURON_READY_ISOLATE": "1"}
    r = run_cli("scan", str(tree), "--format", "json", "--no-cache", *how, env=env, preexec_fn=_stack_8mib)
    assert r.code == 0, r.err
    d = json.loads(r.out)
    kinds = {x["path"]: (x["kind"], x["message"]) for x in d["diagnostics"]}
    assert kinds["crash.py"][0] == "internal-error" and "SIGSEGV" in kinds["crash.py"][1]
    assert kinds["slow.py"][0] == "too-complex" and "longer than 1 s" in kinds["slow.py"][1]
    found = {f["path"] for f in d["findings"] if f["rule"] == "NR1001"}
    assert found == {f"pkg/m{i}.py" for i in range(6)}


def _on_a_terminal(args: list[str], env: dict) -> str:
    """Run a scan with stderr on a pseudo-terminal; what the terminal received."""
    master, slave = pty.openpty()
    full_env = {k: v for k, v in os.environ.items() if k != "CI"}
    full_env.update(env)
    p = subprocess.Popen([sys.executable, "-m", "neuron_ready", *args], stdout=subprocess.DEVNULL,
                         stderr=slave, env=full_env)
    os.close(slave)
    seen = b""
    while True:
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the other side closed
                break
            if not chunk:
                break
            seen += chunk
        elif p.poll() is not None:
            break
    p.wait(timeout=60)
    os.close(master)
    return seen.decode("utf-8", "replace")


def test_progress_shows_on_a_terminal_for_a_longer_scan_only(tmp_path):
    # The slow file keeps the scan busy for a second, more than the moment before progress shows.
    tree = write_tree(tmp_path / "repo", {"slow.py": HANGS_LIBCST, **{f"m{i}.py": CUDA_LINE for i in range(4)}})
    env = {"NEURON_READY_FILE_TIMEOUT": "1"}
    shown = _on_a_terminal(["scan", str(tree), "--no-cache", "--jobs", "2"], env)
    assert "files" in shown and "findings" in shown and "/5" in shown
    assert _on_a_terminal(["scan", str(tree), "--no-cache", "--jobs", "2", "--quiet"], env) == ""
    piped = run_cli("scan", str(tree), "--no-cache", "--jobs", "2", env=env)
    assert piped.code == 0 and piped.err == ""


def test_results_survive_the_cache_encoding(fixtures):
    ctx = ScanContext(load_catalog(), "native", first_party=frozenset({"fusedops"}))
    checked = 0
    for name in ("broken", "cuda_extension", "fused_fallbacks", "mainstream", "notebook", "traps"):
        for job in discover(fixtures / name).jobs:
            result = scan_file(job, ctx)
            assert decode_result(encode_result(result)) == result, job.rel
            checked += bool(result.findings or result.diagnostics)
    assert checked > 15


def test_first_party_packages_matter_only_when_named_like_a_catalog_package(tmp_path):
    """The cache keys on the first-party packages named like a package some rule looks for
    (cache.relevant_first_party); no other first-party name may change a result."""
    code = ("import flash_attn\nimport mylib.kernels\nfrom mylib import cuda_ops\n"
            "import torch\nx = flash_attn.flash_attn_func(q, k, v)\ny = mylib.kernels.run(x).cuda()\n")
    path = tmp_path / "model.py"
    path.write_text(code)
    job = FileJob(str(path), "model.py", "python")
    catalog = load_catalog()

    def scan(first_party):
        return scan_file(job, ScanContext(catalog, "native", first_party=frozenset(first_party)))

    assert scan({"flash_attn", "mylib", "model"}) == scan({"flash_attn"})
    assert scan({"flash_attn"}) != scan(set())  # flash_attn's own tree: its imports are not findings


def test_jobs_must_be_a_whole_number(fixtures):
    r = run_cli("scan", str(fixtures / "mainstream"), "--jobs", "-1")
    assert r.code == 2 and "--jobs" in r.err


TEAM_RULE = (
    '[[rule]]\nid = "NR1097"\ntitle = "our wrapper pins CUDA"\ncategory = "device"\ntargets = ["native"]\n'
    'confidence = "high"\nevidence = "derived"\neffort = { low = 0.1, likely = 0.2, high = 0.5, per = "occurrence" }\n'
    'why = "w"\nremedy = "r"\nsource = "https://example.com/wiki"\ninvalid = ["import ourlib\\nourlib.pin_gpu()  # flagged\\n"]\n'
    '[[rule.match]]\nkind = "call"\nnames = ["ourlib.pin_gpu"]\n'
)


def test_catalog_config_and_tool_version_are_part_of_the_key(fixtures, tmp_path, monkeypatch):
    """Each change rescans every file, and gives the report a scan without the cache gives; going
    back to the first settings finds every entry again."""
    import neuron_ready.cache as cache_module

    tree = shutil.copytree(fixtures / "mainstream", tmp_path / "repo")
    (tree / "wrap.py").write_text("import ourlib\nourlib.pin_gpu()\n", encoding="utf-8")
    (tmp_path / "team.toml").write_text(TEAM_RULE, encoding="utf-8")
    cache = tmp_path / "cache"

    def settings(**changes) -> Settings:
        return Settings(root=tree, cache_dir=cache, jobs=1, **changes)

    first = run_scan(settings())
    files = first.stats.files
    assert first.stats.scanned == files > 3
    variants = {
        "extra catalog": dict(extra_catalogs=[tmp_path / "team.toml"]),
        "select": dict(select=["device"]),
        "ignore": dict(ignore=["NR1001"]),
        "target": dict(target="xla"),
    }
    for label, change in variants.items():
        cached = run_scan(settings(**change))
        assert (cached.stats.cached, cached.stats.scanned) == (0, files), label
        fresh = run_scan(settings(cache=False, **change))
        assert render(cached.report, "json") == render(fresh.report, "json"), label
        assert render(cached.report, "json") != render(first.report, "json"), label
    with_team = run_scan(settings(**variants["extra catalog"]))
    assert any(f.rule == "NR1097" for r in with_team.results for f in r.findings)  # from the cache

    monkeypatch.setattr(cache_module, "__version__", cache_module.__version__ + ".post1")
    assert run_scan(settings()).stats.scanned == files  # another release of the tool
    monkeypatch.undo()
    again = run_scan(settings())
    assert (again.stats.cached, again.stats.scanned) == (files, 0)
    assert render(again.report, "json") == render(first.report, "json")


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_report_does_not_depend_on_the_order_files_are_scanned_in(fixtures, seed):
    import random

    from neuron_ready.engine import active_catalog, find_files, make_context, scan_files
    from neuron_ready.report import build_report

    settings = Settings(root=fixtures, cache=False, jobs=2)
    catalog = active_catalog(settings)
    found = find_files(settings)
    ctx = make_context(settings, catalog, found)

    def report(jobs) -> str:
        return render(build_report(settings, catalog, found, scan_files(jobs, ctx, settings)), "json")

    shuffled = list(found.jobs)
    random.Random(seed).shuffle(shuffled)
    assert shuffled != found.jobs
    assert report(shuffled) == report(found.jobs)


def test_workers_recycled_after_large_files_lose_nothing(tmp_path):
    """A worker exits after a large file and a fresh one takes over (workers.RECYCLE_BYTES)."""
    from neuron_ready.workers import RECYCLE_BYTES

    big = CUDA_LINE + "y = torch.zeros(3).cuda()\n" * (RECYCLE_BYTES // 26 + 1)
    assert len(big) > RECYCLE_BYTES
    tree = write_tree(tmp_path / "repo", {**{f"big{i}.py": big for i in range(3)}, **{f"m{i}.py": CUDA_LINE for i in range(5)}})
    one, two = (run_cli("scan", str(tree), "--format", "json", "--no-cache", "--jobs", j) for j in ("1", "2"))
    assert one.code == two.code == 0 and one.out == two.out
    d = json.loads(two.out)
    assert d["diagnostics"] == [] and {f["path"] for f in d["findings"]} == {f"big{i}.py" for i in range(3)} | {f"m{i}.py" for i in range(5)}


def test_jobs_1_scans_the_largest_files_first_and_keeps_the_job_order(tmp_path):
    """In this process (`--jobs 1`) the files go largest first, as from a worker queue: libcst's
    largest trees are parsed while few results are held (docs/lab/performance.md run T). The
    results, and so the report, stay in job order."""
    from neuron_ready.engine import active_catalog, find_files, make_context, scan_files
    from neuron_ready.workers import FileTask, scan_in_process

    sizes = {"a.py": 1, "b.py": 40, "c.py": 3, "d.py": 40, "e.py": 20}
    tree = write_tree(tmp_path / "repo", {name: CUDA_LINE + "y = 1\n" * n for name, n in sizes.items()})
    settings = Settings(root=tree, cache=False, jobs=1)
    catalog = active_catalog(settings)
    found = find_files(settings)
    ctx = make_context(settings, catalog, found)
    done = []
    tasks = [FileTask(i, job, os.path.getsize(job.path)) for i, job in enumerate(found.jobs)]
    scan_in_process(tasks, ctx, None, lambda task, key, payload: done.append((task.job.rel, decode_result(payload).rel)))
    assert done == [(r, r) for r in ("b.py", "d.py", "e.py", "c.py", "a.py")]  # ties in job order
    results = scan_files(found.jobs, ctx, settings)
    assert [r.rel for r in results] == sorted(sizes) and all(r.findings for r in results)
