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
