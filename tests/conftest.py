import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures"
sys.path.insert(0, str(Path(__file__).resolve().parent))

# Hypothesis: deterministic, bounded runs in CI.
try:
    from hypothesis import HealthCheck, settings

    settings.register_profile(
        "ci", max_examples=60, deadline=None, derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
except ImportError:  # pragma: no cover
    pass


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture(autouse=True, scope="session")
def _cache_outside_the_repo(tmp_path_factory):
    """Scans in tests (in this process and in subprocesses) keep their result cache in a temporary
    directory, not in the fixture trees; tests of the cache itself pass --cache-dir."""
    if "NEURON_READY_CACHE_DIR" not in os.environ:
        os.environ["NEURON_READY_CACHE_DIR"] = str(tmp_path_factory.mktemp("nr-cache"))
    yield


@pytest.fixture(scope="session")
def repo_snapshot(tmp_path_factory) -> Path:
    """This repository as a clean git repository of its own (tracked and new files, as they are in
    the working tree), for tools that install it: pre-commit, pip in the action's install step."""
    import shutil
    import subprocess

    dest = tmp_path_factory.mktemp("snapshot") / "neuron-ready"
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout.split("\0")
    for rel in filter(None, listed):
        src = REPO / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com")
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "snapshot"]):
        subprocess.run(["git", *args], cwd=dest, env=env, check=True, capture_output=True)
    return dest
