"""The effort model: tasks, their costs (hand-computed known answers), P50/P80, class and score,
and its promises as properties (more findings never lower the effort)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import FIXTURES
from neuron_ready.catalog import Catalog, load_catalog, load_text
from neuron_ready.config import Settings
from neuron_ready.effort import LEARNING, effort_class, estimate, growth, kernel_size, readiness_score
from neuron_ready.engine import run_scan
from neuron_ready.model import Finding, KernelFacts
from neuron_ready.simulate import quantiles

CATALOG = load_catalog()


def finding(rule: str, path: str = "train.py", line: int = 1, scope: str = "", fallback: bool = False, **details) -> Finding:
    r = CATALOG.get(rule)
    return Finding(rule=rule, category=r.category, path=path, line=line, column=1, message=r.title, remedy=r.remedy,
                   fallback=fallback, confidence=r.confidence, symbol=details.pop("symbol", ""), scope=scope,
                   details=details)


def task(tasks, tid):
    (t,) = [t for t in tasks if t.id == tid]
    return t


def approx(x):
    return pytest.approx(x, abs=1e-9)


# ------------------------------------------------------------------------------------------ arithmetic


def test_growth_known_values():
    assert growth(0, 1.0) == 0.0 and growth(0.3, 1.0) == 0.3  # a single weighted site: proportional
    assert growth(1, 1.0) == approx(1.0) and growth(1, 0.25) == approx(1.0)
    assert growth(2, 1.0) == approx(math.log2(3))  # log2(1 + n) when rate is 1
    assert growth(3, 1.0) == approx(2.0)
    assert growth(1.6, 0.25) == approx(math.log2(1 + 15 * 1.6) / 4)  # log2(1 + a n) / log2(1 + a), a = 15
    # many repeats: each doubling adds `rate` first-site costs
    assert growth(2 ** 20, 0.5) - growth(2 ** 19, 0.5) == pytest.approx(0.5, abs=1e-4)


def test_kernel_size_is_sqrt_of_lines_over_reference_clamped():
    assert kernel_size(40, 40) == 1.0
    assert kernel_size(160, 40) == 2.0
    assert kernel_size(1, 40) == 0.5 and kernel_size(10_000, 40) == 2.0


@pytest.mark.parametrize("p50,cls", [(0, "days"), (4.99, "days"), (5.0, "weeks"), (19.99, "weeks"), (20.0, "month-plus")])
def test_effort_class_limits(p50, cls):
    assert effort_class(p50) == cls


def test_readiness_score_formula():
    assert readiness_score(0) == 100 and readiness_score(5) == 50 and readiness_score(15) == 25
    assert readiness_score(1000) == 0


def test_monte_carlo_matches_the_triangular_quantiles():
    # Triangular(0, 1, 2): median 1, P80 = 2 - sqrt(0.2 * 2 * 1) = 1.3675
    p50, p80 = quantiles([("one", 0.0, 1.0, 2.0)])
    assert p50 == pytest.approx(1.0, abs=0.02) and p80 == pytest.approx(1.3675, abs=0.02)
    # Two variables sharing a key share their draws: the sum of two copies is twice one.
    k50, k80 = quantiles([("k", 0.0, 1.0, 2.0)])
    a50, a80 = quantiles([("k", 0.0, 1.0, 2.0), ("k", 0.0, 1.0, 2.0)])
    assert (a50, a80) == (pytest.approx(2 * k50), pytest.approx(2 * k80))


def test_seeded_and_repeatable():
    v = [("a", 1.0, 2.0, 6.0), ("b", 0.5, 1.5, 5.0)]
    assert quantiles(v) == quantiles(list(reversed(v)))


# ------------------------------------------------------------------------------------------ tasks


def test_mechanical_family_grows_with_the_log_of_call_sites():
    one, _ = estimate([finding("NR1001")], CATALOG)
    assert task(one, "T-device").person_days.likely == approx(0.05)
    many, _ = estimate([finding("NR1001", line=i) for i in range(1, 51)], CATALOG)
    # 50 `.cuda()` calls: 0.05 x log2(51) = 0.2836, not 50 x 0.05
    assert task(many, "T-device").person_days.likely == approx(0.05 * math.log2(51))
    assert len(many) == 1 and len(task(many, "T-device").findings) == 50


def test_confidence_weights_a_site():
    tasks, _ = estimate([finding("NR1209")], CATALOG)  # low confidence: weight 0.3, base 0.02
    assert task(tasks, "T-precision").person_days.likely == approx(0.02 * 0.3)


def test_triton_kernel_known_answer():
    f = finding("NR1801", path="k.py", line=3, kernel="fused_bwd", lines=30, atomics=2, backward=True, autotune_configs=0)
    tasks, _ = estimate([f], CATALOG)
    t = task(tasks, "T-triton-fused_bwd")
    # NR1801 = 2 / 5 / 15 per kernel unit; 30 lines = one unit; atomics x1.25; on the learning curve:
    # learned(1.25) = 1 + (1.25^b - 1) / b with b = log2(0.8) + 1
    b = math.log2(LEARNING) + 1
    units = 1 + (1.25 ** b - 1) / b
    assert (t.person_days.low, t.person_days.likely, t.person_days.high) == (
        approx(2 * units), approx(5 * units), approx(15 * units))
    assert t.details["kernel_units"] == 1.25


def test_forward_backward_and_copies_of_one_op_are_one_task():
    fs = [finding("NR1801", path="a.py", line=3, kernel="_token_mixer_fwd_kernel", lines=30),
          finding("NR1801", path="b.py", line=30, kernel="_token_mixer_bwd_kernel", lines=30),
          finding("NR1801", path="models/x/copy.py", line=3, kernel="token_mixer_fwd_kernel_fp16", lines=30)]
    tasks, _ = estimate(fs, CATALOG)
    assert [t.id for t in tasks] == ["T-triton-token_mixer"]
    # the first whole, its backward a 0.35 share (wherever it is), the copy in another file 0.1
    assert tasks[0].details["kernel_units"] == approx(1 + 0.35 + 0.1)


def test_a_kernel_with_an_in_repo_reference_is_a_switch():
    f = finding("NR1801", path="k.py", line=3, kernel="_token_mixer_fwd_kernel", lines=60)
    tasks, _ = estimate([f], CATALOG, references=frozenset({"token_mixer"}))
    t = tasks[0]
    assert t.kind == "switch-to-reference" and t.person_days.likely == approx(2.0)
    rewrite, _ = estimate([f], CATALOG)
    assert rewrite[0].person_days.likely > 2 * t.person_days.likely


def test_kernels_follow_one_learning_curve():
    """200 distinct Triton ops cost far less than 200 first kernels, and never more than 400 P50 days."""
    fs = [finding("NR1801", path=f"k{i}.py", line=1, kernel=f"op{i}_kernel", lines=30) for i in range(200)]
    tasks, est = estimate(fs, CATALOG)
    assert len(tasks) == 200 and est.p50 < 400
    first = sum(t.person_days.likely for t in tasks)
    b = math.log2(LEARNING) + 1
    assert first == approx(5 * (1 + (200 ** b - 1) / b))


def test_triton_launch_and_autotune_join_their_kernel():
    fs = [
        finding("NR1802", path="k.py", line=2, kernel="fwd", autotune_configs=3),
        finding("NR1801", path="k.py", line=5, kernel="fwd", lines=30),
        finding("NR1803", path="m.py", line=9, symbol="fwd"),
    ]
    tasks, _ = estimate(fs, CATALOG)
    assert [t.id for t in tasks] == ["T-triton-fwd"]
    # kernel 5 + autotune 0.1 x log2(4) = 0.2 + one launch 0.25
    assert tasks[0].person_days.likely == approx(5 + 0.2 + 0.25)


def test_a_users_rule_is_costed_by_its_costing_field_not_its_id():
    """A rule from an extra catalog that says `costing = "triton-kernel"` walks the Triton learning
    curve on its own numbers, as NR1801 does; the same rule costed from its catalog numbers does not."""
    raw = """
[[rule]]
id = "NR1899"
title = "Another Triton-like kernel DSL"
category = "triton"
targets = ["native"]
confidence = "high"
evidence = "derived"
effort = { low = 1.0, likely = 3.0, high = 9.0, per = "occurrence" }
costing = "triton-kernel"
why = "w"
remedy = "r"
source = "https://example.com"
invalid = ["import triton\\n@triton.jit  # flagged\\ndef k(x):\\n    pass\\n"]
[[rule.match]]
kind = "decorator"
names = ["triton.jit"]
"""
    (user,) = load_text(raw, "extra.toml")
    f = Finding(rule="NR1899", category="triton", path="k.py", line=3, column=1, message="m", remedy="r",
                details={"kernel": "_token_mixer_fwd_kernel", "lines": 30})
    tasks, _ = estimate([f], Catalog({"NR1899": user}))
    assert [t.id for t in tasks] == ["T-triton-token_mixer"] and tasks[0].person_days.likely == approx(3.0)
    plain, _ = estimate([f], Catalog({"NR1899": replace(user, costing="catalog")}))
    assert [t.id for t in plain] == ["T-triton"]


def test_fallback_task_costs_only_checking_the_fallback():
    fs = [finding("NR1901", path="a.py", fallback=True), finding("NR1901", path="b.py", fallback=True)]
    tasks, _ = estimate(fs, CATALOG)
    t = task(tasks, "T-lib-NR1901")
    assert t.fallback and (t.person_days.low, t.person_days.likely, t.person_days.high) == (0.1, 0.25, 1.0)
    full, _ = estimate(fs + [finding("NR1901", path="c.py")], CATALOG)
    assert not task(full, "T-lib-NR1901").fallback and task(full, "T-lib-NR1901").person_days.likely > 3.0


def test_library_swap_grows_slowly_with_files():
    tasks, _ = estimate([finding("NR1901", path=f"m{i}.py") for i in range(4)], CATALOG)
    # 3 days for the swap, x growth(4 files, 0.25)
    assert task(tasks, "T-lib-NR1901").person_days.likely == approx(3 * math.log2(1 + 15 * 4) / 4)
    assert task(tasks, "T-lib-NR1901").kind == "swap-library"


def test_dynamic_shape_sites_cluster_per_function_and_learn_across_functions():
    fs = [
        finding("NR1501", path="m.py", line=1, scope="Net.forward"),
        finding("NR1501", path="m.py", line=2, scope="Net.forward"),
        finding("NR1501", path="m.py", line=9, scope="loss_fn"),
    ]
    tasks, est = estimate(fs, CATALOG)
    a, b = task(tasks, "T-dyn-m.py:Net.forward"), task(tasks, "T-dyn-m.py:loss_fn")
    size_a = growth(2, 0.5)  # two sites in one function share a fix
    total = 1.5 * growth(size_a + 1.0, 1.0)  # the NR1501 base, grown with the family's experience
    assert a.person_days.likely + b.person_days.likely == approx(total)
    assert a.person_days.likely == approx(total * size_a / (size_a + 1.0))
    assert est.person_days.likely == approx(total)


def test_setup_code_counts_a_quarter():
    tasks, _ = estimate([finding("NR1501", scope="Net.__init__")], CATALOG)
    assert tasks[0].person_days.likely == approx(1.5 * 0.25)


def test_one_task_per_distinct_unsupported_op():
    fs = [finding("NR1601", symbol="torch.fft.rfft"), finding("NR1601", line=2, symbol="torch.fft.rfft"),
          finding("NR1603", line=3, symbol=".sort()"), finding("NR1603", line=4, symbol="torch.sort")]
    tasks, _ = estimate(fs, CATALOG)
    assert sorted(t.id for t in tasks) == ["T-op-NR1601-rfft", "T-op-NR1603-sort"]


def test_related_op_variants_in_one_function_are_one_task():
    fs = [finding("NR1601", scope="Spectral.forward", symbol="torch.fft.fft"),
          finding("NR1601", line=2, scope="Spectral.forward", symbol="torch.fft.ifft"),
          finding("NR1601", line=3, scope="Spectral.forward", symbol="torch.fft.ifft2"),
          finding("NR1601", line=9, scope="other", symbol="torch.fft.ifft")]
    tasks, _ = estimate(fs, CATALOG)
    assert sorted(t.id for t in tasks) == ["T-op-NR1601-fft", "T-op-NR1601-ifft"]
    assert len(task(tasks, "T-op-NR1601-fft").findings) == 3


def test_cuda_extension_task_known_answer():
    """fixtures/cuda_extension: setup.py builds fusedops._C from binding.cpp, scan_kernel.cu (2 kernels,
    21 kernel lines) and scan_backward.cu (1 backward kernel, 12 lines)."""
    report = run_scan(Settings(root=FIXTURES / "cuda_extension")).report
    t = task(report.tasks, "T-ext-fusedops._C")
    size = lambda lines: math.sqrt(lines / 40)  # noqa: E731 - a kernel's units: sqrt(lines / 40)
    # two ops: chunk_scan (its backward whole, its forward a 0.35 share) and reduce_carry
    units = size(12) + 0.35 * size(10.5) + size(10.5)
    b = math.log2(LEARNING) + 1
    learned = 1 + (units ** b - 1) / b  # one extension's kernels on the 80 % learning curve
    host = 0.6  # binding.cpp: one host file of medium confidence
    # build (NR1701) + learned kernel units x NR1703 + host file x NR1704 + backward add-on
    assert t.person_days.likely == approx(3 + 5 * learned + 2 * host + 2)
    assert t.person_days.low == approx(1 + 2 * learned + 0.5 * host + 0.5)
    assert t.person_days.high == approx(10 + 15 * learned + 5 * host + 5)
    assert t.details["kernels"] == 3 and t.details["backward"] is True
    paths = {report.findings[i].path for i in t.findings}
    assert paths == {"setup.py", "csrc/binding.cpp", "csrc/scan_kernel.cu", "csrc/scan_backward.cu"}


def test_kernel_facts_read_what_the_scanners_write():
    """model.KernelFacts is the typed form of the measurements in a finding's details (and its JSON)."""
    report = run_scan(Settings(root=FIXTURES / "cuda_extension")).report
    by_path = {f.path: f for f in report.findings if f.rule == "NR1703"}
    facts = by_path["csrc/scan_kernel.cu"].kernel_facts
    assert facts.kernels == 2 and facts.kernel_loc == 21 and len(facts.kernel_names) == 2 and facts.loc > 21
    assert by_path["csrc/scan_backward.cu"].kernel_facts.backward
    triton = [f for f in report.findings if f.rule == "NR1801"]
    assert triton and all(f.kernel_facts.kernel == f.details["kernel"] and f.kernel_facts.lines > 0 for f in triton)
    assert Finding("NR1001", "device", "a.py", 1, 1, "m", "r").kernel_facts == KernelFacts()


def test_every_finding_belongs_to_exactly_one_task():
    report = run_scan(Settings(root=FIXTURES / "cuda_extension")).report
    indices = sorted(i for t in report.tasks for i in t.findings)
    assert indices == list(range(len(report.findings)))


def test_estimate_sums_the_tasks_and_names_drivers():
    report = run_scan(Settings(root=FIXTURES / "cuda_extension")).report
    est = report.estimate
    assert est.person_days.likely == approx(sum(t.person_days.likely for t in report.tasks))
    assert est.drivers[0] == "T-ext-fusedops._C"
    assert est.person_days.low <= est.p50 <= est.p80 <= est.person_days.high


# ------------------------------------------------------------------------------------------ properties

_POOL = [
    ("NR1001", {}), ("NR1003", {}), ("NR1209", {}), ("NR1202", {}), ("NR1101", {}), ("NR1304", {}),
    ("NR1401", {}), ("NR1501", {}), ("NR1504", {}), ("NR1506", {}), ("NR1601", {"symbol": "torch.fft.fft"}),
    ("NR1603", {"symbol": "torch.sort"}), ("NR1609", {"symbol": "torch.linalg.svd"}),
    ("NR1801", {"kernel": "k", "lines": 40, "atomics": 1}), ("NR1803", {"symbol": "k"}),
    ("NR1802", {"kernel": "k", "autotune_configs": 4}), ("NR1805", {}), ("NR1901", {}), ("NR1906", {}),
    ("NR1703", {"kernels": 2, "kernel_loc": 80, "loc": 120, "backward": True}), ("NR1706", {}), ("NR2002", {}),
    ("NR1109", {}), ("NR1708", {}),
]
_SCOPES = ["", "Net.forward", "Net.__init__", "train_step", "helper"]
_finding = st.builds(
    lambda i, path, line, scope, fb: finding(_POOL[i][0], path=path, line=line, scope=scope,
                                             fallback=fb and CATALOG.get(_POOL[i][0]).fallback, **dict(_POOL[i][1])),
    st.integers(0, len(_POOL) - 1), st.sampled_from(["a.py", "b.py", "pkg/c.py", "csrc/k.cu"]),
    st.integers(1, 50), st.sampled_from(_SCOPES), st.booleans(),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_finding, max_size=25), _finding)
def test_more_findings_never_lower_the_effort(base, extra):
    _, before = estimate(base, CATALOG)
    _, after = estimate(base + [extra], CATALOG)
    tol = 1e-9
    assert after.person_days.low >= before.person_days.low - tol
    assert after.person_days.likely >= before.person_days.likely - tol
    assert after.person_days.high >= before.person_days.high - tol
    assert after.p50 >= before.p50 - tol and after.p80 >= before.p80 - tol
    assert after.score <= before.score


@settings(max_examples=30, deadline=None)
@given(st.lists(_finding, max_size=20))
def test_estimate_is_deterministic_and_consistent(fs):
    tasks, est = estimate(fs, CATALOG)
    tasks2, est2 = estimate(list(fs), CATALOG)
    assert est.to_dict() == est2.to_dict() and [t.to_dict() for t in tasks] == [t.to_dict() for t in tasks2]
    assert sorted(i for t in tasks for i in t.findings) == list(range(len(fs)))
    assert est.p50 <= est.p80 + 1e-9
    assert est.effort_class == effort_class(est.p50)


def test_a_reference_named_with_the_kernels_folder_or_for_the_op_a_variant_extends():
    from neuron_ready.effort import has_reference, reference_stems

    refs = reference_stems(["causal_conv1d_ref", "causal_conv1d_varlen_states_ref", "rmsnorm_ref",
                            "fna_forward_torch_op", "generate_reference_fna"])
    # `causal_conv1d/` gave the kernel's op its folder words; elsewhere the words are another op's
    assert has_reference("varlen_states", refs, ["causal_conv1d/causal_conv1d_varlen.py"])
    assert not has_reference("varlen_states", refs, ["ops/varlen.py"])
    # a kernel registered as a torch op is no PyTorch version of it; `generate_fna` is another op
    assert "fna" not in refs and not has_reference("fna", refs, ["csrc/fna/kernel.cu"])
    assert has_reference("causal_conv1d_channellast", refs)  # a layout variant of a referenced op
    assert has_reference("rmsnorm", refs)
    assert not has_reference("states", frozenset({"varlen_states_x"}))
    assert not has_reference("selective_scan", refs) and not has_reference("ssd_fused", frozenset({"ssd_x"}))


def test_a_kernel_named_for_a_pytorch_core_op_has_a_reference_in_pytorch():
    from neuron_ready.effort import has_reference

    for op in ("scatter", "scatter_arg", "segment_csr_broadcast", "rms_norm_add", "softmax_multi_block", "cross_entropy"):
        assert has_reference(op, frozenset()), op
    for op in ("selective_scan", "chunk_scan", "flash_attn", "scattermoe", "relu2mlp"):  # not an op torch has
        assert not has_reference(op, frozenset()), op
