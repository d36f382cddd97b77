"""Run the real console entry point in a subprocess: exit codes, stdout and stderr as a user sees them."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Run:
    code: int
    out: str
    err: str


def run_cli(*args: str, cwd: Path | str | None = None, env: dict | None = None, timeout: int = 300,
            preexec_fn=None) -> Run:
    full_env = dict(os.environ)
    full_env.pop("NEURON_READY_DEBUG", None)
    full_env.setdefault("NEURON_READY_CACHE_DIR", str(Path(cwd or ".").resolve() / ".nr-test-cache"))
    if env:
        full_env.update(env)
    p = subprocess.run(
        [sys.executable, "-m", "neuron_ready", *args],
        cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout, preexec_fn=preexec_fn,
    )
    return Run(p.returncode, p.stdout, p.stderr)
