"""Near-copy kernels by content: the fingerprint (a bottom-k sketch of normalised token shingles),
its similarity, and the effort model folding a renamed copy of a kernel into the op it copies."""

from __future__ import annotations

import keyword
import os
import subprocess
import sys
import textwrap

import libcst as cst
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from neuron_ready import nearcopy
from neuron_ready.catalog import load_catalog
from neuron_ready.config import Settings
from neuron_ready.effort import COPY_SHARE, VARIANT_SHARE, estimate
from neuron_ready.engine import run_scan
from neuron_ready.sources.kerneltokens import body_tokens
from scanning import write_tree
from test_effort import finding

CATALOG = load_catalog()

# A chunked linear-attention forward, as a model family's copy of it would read.
_KERNEL = '''
@triton.jit
def {name}({q}, {k}, {v}, {o}, {scale}, T, BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr):
    i_v, i_t, i_bh = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    {acc} = tl.zeros([BT, BV], dtype=tl.float32)
    {attn} = tl.zeros([BT, BT], dtype=tl.float32)
    for i_k in range(tl.cdiv(128, BK)):
        p_q = tl.make_block_ptr({q} + i_bh * T * 128, (T, 128), (128, 1), (i_t * BT, i_k * BK), (BT, BK), (1, 0))
        p_k = tl.make_block_ptr({k} + i_bh * T * 128, (128, T), (1, 128), (i_k * BK, i_t * BT), (BK, BT), (0, 1))
        b_q = tl.load(p_q, boundary_check=(0, 1))
        b_k = tl.load(p_k, boundary_check=(0, 1))
        {attn} += tl.dot(b_q, b_k)
    o_i = tl.arange(0, BT)
    m_s = o_i[:, None] >= o_i[None, :]
    {attn} = tl.where(m_s, {attn} * {scale}, 0.0)
    p_v = tl.make_block_ptr({v} + i_bh * T * 128, (T, 128), (128, 1), (i_t * BT, i_v * BV), (BT, BV), (1, 0))
    b_v = tl.load(p_v, boundary_check=(0, 1))
    {acc} += tl.dot({attn}.to(b_v.dtype), b_v)
    p_o = tl.make_block_ptr({o} + i_bh * T * 128, (T, 128), (128, 1), (i_t * BT, i_v * BV), (BT, BV), (1, 0))
    tl.store(p_o, {acc}.to(p_o.dtype.element_ty), boundary_check=(0, 1))
'''
_ROLES = ("q", "k", "v", "o", "scale", "acc", "attn")
_PLAIN = dict(zip(_ROLES, _ROLES))

# Genuinely different kernels: a row-wise RMSNorm and a histogram with atomics.
_NORM = '''
@triton.jit
def rms_norm_fwd_kernel(X, Y, W, stride, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(X + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    var = tl.sum(x * x, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    w = tl.load(W + cols, mask=mask)
    tl.store(Y + row * stride + cols, x * rstd * w, mask=mask)
'''
_HIST = '''
@triton.jit
def histogram_kernel(X, H, N, BINS: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < N, other=0)
    bucket = tl.minimum(tl.maximum(x, 0), BINS - 1)
    tl.atomic_add(H + bucket, 1, mask=offs < N)
'''


def kernel(name: str = "chunk_fwd_kernel", **names: str) -> str:
    return _KERNEL.format(name=name, **{**_PLAIN, **names})


def sketch(source: str) -> frozenset[int]:
    (func,) = [n for n in cst.parse_module(textwrap.dedent(source)).body if type(n) is cst.FunctionDef]
    return nearcopy.hashes(nearcopy.fingerprint(body_tokens(func.body)))


# ------------------------------------------------------------------------------------------ fingerprint

_IDENT = st.from_regex(r"[a-z_][a-z0-9_]{0,11}", fullmatch=True).filter(
    lambda s: not keyword.iskeyword(s) and s not in {"tl", "triton", "range", "i_k", "i_v", "i_t", "i_bh", "T",
                                                    "p_q", "p_k", "p_v", "p_o", "b_q", "b_k", "b_v", "o_i", "m_s"}
    and not s.startswith("B"))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=300))
def test_a_kernel_is_a_copy_of_itself(tokens):
    s = nearcopy.hashes(nearcopy.fingerprint(tokens))
    assert 0 < len(s) <= nearcopy.SKETCH and nearcopy.similarity(s, s) == 1.0
    assert nearcopy.copy_of(s, [(s, "me")]) == "me"


@settings(max_examples=40, deadline=None)
@given(st.lists(_IDENT, min_size=len(_ROLES), max_size=len(_ROLES), unique=True), _IDENT)
def test_renaming_identifiers_keeps_a_copy(names, name):
    renamed = sketch(kernel(name, **dict(zip(_ROLES, names))))
    assert renamed == sketch(kernel())  # identifiers are normalised: the same shingles
    assert nearcopy.copy_of(renamed, [(sketch(kernel()), "op")]) == "op"


def test_a_small_edit_is_a_near_copy_and_another_algorithm_is_not():
    base = sketch(kernel())
    edited = sketch(kernel().replace("    o_i = tl.arange(0, BT)\n", "    o_i = tl.arange(0, BT)\n    b_g = tl.load(g + i_bh * T + o_i)\n"))
    assert nearcopy.similarity(base, edited) >= nearcopy.THRESHOLD  # (the added shingles may fall outside the sample)
    for other in (_NORM, _HIST):
        assert nearcopy.similarity(base, sketch(other)) < nearcopy.THRESHOLD
    assert nearcopy.similarity(sketch(_NORM), sketch(_HIST)) < nearcopy.THRESHOLD
    assert nearcopy.copy_of(sketch(_NORM), [(base, "attn"), (sketch(_HIST), "hist")]) is None


def test_the_estimate_follows_the_jaccard_of_large_shingle_sets():
    """Past SKETCH shingles the sketch samples: two streams sharing half their shingles estimate
    about a third (|A & B| / |A | B| = 1 / 3), within the sampling error of 64 hashes."""
    shared = [f"s{i}" for i in range(2000)]
    a = nearcopy.hashes(nearcopy.fingerprint(shared + [f"a{i}" for i in range(2000)]))
    b = nearcopy.hashes(nearcopy.fingerprint(shared + [f"b{i}" for i in range(2000)]))
    assert len(a) == len(b) == nearcopy.SKETCH
    assert abs(nearcopy.similarity(a, b) - 1 / 3) < 0.15


def test_the_fingerprint_is_the_same_in_every_process():
    """crc32, not hash(): another interpreter with another hash seed computes the same sketch."""
    code = ("from neuron_ready import nearcopy\n"
            "print(nearcopy.fingerprint(['tl.load', '$id', 'BinaryOperation', 'Add', '$id', 'Integer'] * 9))")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")}
    assert len(outs) == 1 and outs.pop().strip() == nearcopy.fingerprint(
        ["tl.load", "$id", "BinaryOperation", "Add", "$id", "Integer"] * 9)


def test_malformed_fingerprints_compare_as_nothing():
    assert nearcopy.hashes("") == frozenset() and nearcopy.hashes("zz" * 8) == frozenset()
    assert nearcopy.similarity(frozenset(), frozenset()) == 0.0


def _families(draw_sets):
    """Sketches as kernel collections hold them: a few bases and many edited copies of each, over a
    small universe of hashes (so that boilerplate hashes are shared across families too)."""
    out = []
    for base, edits in draw_sets:
        out.append(frozenset(base))
        for drop, add in edits:
            out.append(frozenset((set(base) - set(drop)) | set(add)))
    return out


_HASH = st.integers(min_value=0, max_value=400)
_FAMILY = st.tuples(st.lists(_HASH, min_size=1, max_size=80, unique=True),
                    st.lists(st.tuples(st.lists(_HASH, max_size=25), st.lists(_HASH, max_size=25)), max_size=6))


@settings(max_examples=150, deadline=None)
@given(st.lists(_FAMILY, min_size=1, max_size=6), st.randoms(use_true_random=False))
def test_the_indexed_fold_finds_what_the_pass_over_every_kernel_finds(families, rnd):
    """Sketches' candidate filter is exact: folding kernels one by one gives the same near-copy
    (the same earlier kernel, ties to the first) as copy_of over the plain list, with or without the
    rarity order, whatever the sketch sizes (more than SKETCH too: a fingerprint read from elsewhere)."""
    sketches = _families(families)
    rnd.shuffle(sketches)
    plain: list = []
    indexed, ranked = nearcopy.Sketches(), nearcopy.Sketches(sketches)
    for i, s in enumerate(sketches):
        expected = nearcopy.copy_of(s, plain)
        assert nearcopy.copy_of(s, indexed) == expected
        assert nearcopy.copy_of(s, ranked) == expected
        for grouped in (plain, indexed, ranked):
            grouped.append((s, i))
    assert list(indexed) == list(ranked) == plain and len(indexed) == len(plain)


# ------------------------------------------------------------------------------------------ a scanned tree


def test_a_renamed_copy_in_another_folder_joins_the_op_it_copies(tmp_path):
    header = "import triton\nimport triton.language as tl\n"
    write_tree(tmp_path, {
        "pkg/ops/gla/chunk.py": header + kernel("chunk_gla_fwd_kernel_o") + _NORM,
        # the same algorithm for another model family: renamed kernel and variables, one line added
        "pkg/ops/retention/parallel.py": header + kernel("parallel_retention_fwd_kernel", q="q_ptr", k="k_ptr",
                                                         v="v_ptr", o="out", acc="b_o", attn="b_s").replace(
            "    o_i = tl.arange(0, BT)\n", "    o_i = tl.arange(0, BT)\n    d_s = tl.exp2(o_i * 0.5)\n"),
        "pkg/ops/hist/hist.py": header + _HIST,
    })
    report = run_scan(Settings(root=tmp_path)).report
    kernels = [f for f in report.findings + report.off_path if f.rule == "NR1801"]
    assert len(kernels) == 4 and all(len(f.details["fingerprint"]) % 8 == 0 and f.details["fingerprint"] for f in kernels)
    tasks = {t.id: t for t in report.tasks + [t for feat in report.opt_in for t in feat.tasks]
             if t.category == "triton"}
    assert sorted(tasks) == ["T-triton-chunk_o", "T-triton-histogram", "T-triton-rms_norm"], sorted(tasks)
    t = tasks["T-triton-chunk_o"]
    assert t.details["near_copies"] == ["parallel_retention_fwd_kernel"]
    assert "2 kernels in pkg/ops/gla/chunk.py, pkg/ops/retention/parallel.py, 1 of them near-copies by content" in t.title
    assert "near_copies" not in tasks["T-triton-histogram"].details


# ------------------------------------------------------------------------------------------ the effort model


def test_a_near_copy_costs_a_copy_share_and_a_backward_match_a_variant_share():
    fp = nearcopy.fingerprint(body_tokens(cst.parse_statement(textwrap.dedent(kernel())).body))
    fs = [finding("NR1801", path="ops/gla/chunk.py", line=3, kernel="chunk_gla_fwd_kernel_o", lines=30, fingerprint=fp),
          finding("NR1801", path="ops/rwkv/fused.py", line=3, kernel="fused_rwkv_fwd_kernel", lines=30, fingerprint=fp),
          finding("NR1801", path="ops/rwkv/fused.py", line=90, kernel="fused_rwkv_bwd_kernel", lines=30, fingerprint=fp)]
    tasks, _ = estimate(fs, CATALOG)
    (t,) = tasks
    assert t.id == "T-triton-chunk_o" and t.details["near_copies"] == ["fused_rwkv_fwd_kernel"]
    # the first whole; the renamed forward elsewhere a copy; the backward that matches it a variant
    assert t.details["kernel_units"] == round(1 + COPY_SHARE + VARIANT_SHARE, 2)
    plain = [finding(f.rule, path=f.path, line=f.line, kernel=f.details["kernel"], lines=30) for f in fs]
    assert len(estimate(plain, CATALOG)[0]) == 2  # without fingerprints: two ops by name (fused, chunk_o)


def test_folding_is_the_same_whatever_the_finding_order_and_spares_referenced_ops():
    fp = nearcopy.fingerprint(body_tokens(cst.parse_statement(textwrap.dedent(kernel())).body))
    fs = [finding("NR1801", path=f"ops/m{i}/k.py", line=3, kernel=f"model{i}_scan_kernel", lines=30, fingerprint=fp)
          for i in range(5)]
    a, est_a = estimate(fs, CATALOG)
    b, est_b = estimate(list(reversed(fs)), CATALOG)
    assert [t.id for t in a] == [t.id for t in b] == ["T-triton-model0_scan"]
    assert est_a.p50 == est_b.p50
    # an op with a PyTorch reference is switched to it, never folded into another op
    refd, _ = estimate(fs, CATALOG, references=frozenset({"model3_scan"}))
    assert sorted(t.id for t in refd) == ["T-triton-model0_scan", "T-triton-model3_scan"]
    assert [t.kind for t in refd if t.id == "T-triton-model3_scan"] == ["switch-to-reference"]
