"""Prebuilt CUDA libraries (NR1718): real ELF files built by tests/binaries/build.sh, read through
pyelftools by the real scanner; hostile bytes named `.so` become diagnostics, never tracebacks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cli import run_cli
from conftest import FIXTURES
from neuron_ready.config import Settings
from neuron_ready.engine import run_scan
from neuron_ready.render import json as json_fmt
from neuron_ready.sources.binary import NotReadable, binary_kind, read_binary

QUANTLIB = FIXTURES / "ctx_prebuilt_cuda" / "quantlib"
API = ["cadam_8bit_blockwise_grad_bf16", "cadam_8bit_blockwise_grad_fp32", "cdequantize_blockwise_fp32",
       "cquantize_blockwise_fp16", "cquantize_blockwise_fp32"]


def _facts(name: str):
    with open(QUANTLIB / name, "rb") as fh:
        return read_binary(fh)


def test_a_cuda_build_carries_device_code_and_exports_its_c_api():
    facts = _facts("libquant_cuda121.so")
    assert facts.cuda and ".nv_fatbin" in facts.evidence
    assert facts.exports == API  # the static helper and the runtime's symbols are not its API


def test_the_cpu_build_is_not_cuda():
    facts = _facts("libquant_cpu.so")
    assert not facts.cuda and facts.exports == API


@pytest.mark.parametrize("name,kind", [("libfoo.so", "binary"), ("libfoo.so.1.2", "binary"),
                                       ("foo.sol", None), ("so.py", None), ("lib.so.txt", None)])
def test_binary_kind_is_an_elf_shared_library_name(name, kind):
    assert binary_kind(name) == kind


def _scan(root: Path, *args: str) -> dict:
    r = run_cli("scan", str(root), "--isolated", "--format", "json", *args)
    assert r.code in (0, 1), r.err
    return json.loads(r.out)


def test_two_cuda_builds_of_one_library_are_one_port(tmp_path):
    report = _scan(FIXTURES / "ctx_prebuilt_cuda")
    hits = sorted(f["path"] for f in report["findings"] if f["rule"] == "NR1718")
    assert hits == ["quantlib/libquant_cuda118.so", "quantlib/libquant_cuda121.so"]
    assert all(f["context"] == "step" and f["prebuilt"] for f in report["findings"] if f["rule"] == "NR1718")
    task = next(t for t in report["tasks"] if t["id"] == "T-ext-quantlib")
    assert task["kernels"] == len(API)  # counted once across the two builds, not ten
    assert task["ops"] == 3  # dtype variants fold: quantize_blockwise, dequantize_blockwise, adam_8bit_blockwise
    assert task["title"].startswith("Re-implement prebuilt CUDA library `quantlib`")
    one = tmp_path / "one"
    shutil.copytree(FIXTURES / "ctx_prebuilt_cuda", one)
    (one / "quantlib" / "libquant_cuda118.so").unlink()
    single = _scan(one)
    assert next(t for t in single["tasks"] if t["id"] == "T-ext-quantlib")["person_days"] == task["person_days"]


@pytest.mark.parametrize("content", [
    b"",  # empty
    b"\x7fELF" + b"\xff" * 60,  # an ELF header with nonsense fields
    b"#!/bin/sh\necho not a library\n",  # text named .so
])
def test_hostile_bytes_named_so_become_a_diagnostic(tmp_path, content):
    (tmp_path / "train.py").write_text("import torch\nmodel = torch.nn.Linear(2, 2)\n", encoding="utf-8")
    (tmp_path / "libevil_cuda.so").write_bytes(content)
    report = _scan(tmp_path)
    diags = [d for d in report["diagnostics"] if d["path"] == "libevil_cuda.so"]
    assert len(diags) == 1 and diags[0]["kind"] == "binary", report["diagnostics"]
    assert "not a readable ELF shared library" in diags[0]["message"]
    assert not any(f["path"] == "libevil_cuda.so" for f in report["findings"])


def test_a_truncated_library_is_a_diagnostic(tmp_path):
    data = (QUANTLIB / "libquant_cuda121.so").read_bytes()
    (tmp_path / "libcut_cuda.so").write_bytes(data[: len(data) // 3])  # section table cut off
    with open(tmp_path / "libcut_cuda.so", "rb") as fh:
        with pytest.raises(NotReadable):
            read_binary(fh)


def test_libraries_are_cached_by_their_whole_content(tmp_path):
    """The cache keys a library by all its bytes (its ELF tables sit at its end, past the first
    max-file-size bytes other files are keyed by): unchanged, it comes from the cache, serial or
    parallel; changed, it is read again."""
    tree = shutil.copytree(FIXTURES / "ctx_prebuilt_cuda", tmp_path / "t")
    for jobs in (1, 2):
        settings = Settings(root=tree, cache_dir=tmp_path / f"cache{jobs}", jobs=jobs, max_file_size=1024)
        cold = run_scan(settings)
        warm = run_scan(settings)
        assert (warm.stats.cached, warm.stats.scanned) == (cold.stats.files, 0), jobs
        assert json_fmt.render(warm.report) == json_fmt.render(cold.report)
    lib = tree / "quantlib" / "libquant_cuda118.so"
    data = bytearray(lib.read_bytes())
    data[-8:] = b"\xff" * 8  # past the first 1024 bytes: only a whole-file key sees it
    lib.write_bytes(bytes(data))
    again = run_scan(Settings(root=tree, cache_dir=tmp_path / "cache1", max_file_size=1024))
    assert again.stats.scanned >= 1
    shutil.copy(QUANTLIB / "libquant_cpu.so", lib)
    again = run_scan(Settings(root=tree, cache_dir=tmp_path / "cache1", max_file_size=1024))
    assert [f.path for f in again.report.findings if f.rule == "NR1718"] == ["quantlib/libquant_cuda121.so"]
