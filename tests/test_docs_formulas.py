"""The formulas docs/SCIENCE.md writes for the softmax Jacobian and the gradient, transcribed here
and checked against the engine at several n and weight vectors (and against torch's autograd for
the chain rule). Each formula is quoted as the docs print it: editing one there fails here until
its transcription is checked again."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from engine.softmax import jacobian, row_metrics, softmax

DOCS = (Path(__file__).resolve().parents[1] / "docs/SCIENCE.md").read_text(encoding="utf-8")
RNG = np.random.default_rng(19)


def _rows() -> list[np.ndarray]:
    """Logit rows at several n: flat, mild, wide, near one-hot, with ties."""
    rows = [np.zeros(2), np.zeros(8), np.array([1.0, 0.0, -1.0]), np.array([2.0, 1.0, 0.0, -1.0]),
            np.array([8.0, 0.0, -8.0]), np.array([3.0, 3.0, 0.0, -1.0, -1.0])]
    for n in (2, 5, 8, 100):
        for spread in (0.5, 2.0, 6.0):
            rows.append(RNG.normal(size=n) * spread)
    return rows


ROWS = _rows()


def quoted(formula: str) -> str:
    assert formula in DOCS, f"docs/SCIENCE.md no longer prints {formula!r}"
    return formula


@pytest.mark.parametrize("z", ROWS, ids=lambda z: f"n{z.size}")
def test_the_jacobian_and_its_size_as_the_docs_write_them(z: np.ndarray) -> None:
    p = softmax(z)
    n = p.size
    quoted("J = diag(p) - p p^T,      J_ij = p_i (delta_ij - p_j)")
    want = np.array([[p[i] * ((i == j) - p[j]) for j in range(n)] for i in range(n)])
    # (the naive 1 - p_max of a row saturated to 1 - 3e-6 loses 5 digits; the engine does not)
    np.testing.assert_allclose(jacobian(p), want, rtol=1e-8, atol=1e-300)
    np.testing.assert_allclose(jacobian(p), np.diag(p) - np.outer(p, p), rtol=1e-12, atol=1e-15)
    quoted("||J||_F^2 = sum p_i^2 - 2 sum p_i^3 + (sum p_i^2)^2")
    closed = (p**2).sum() - 2 * (p**3).sum() + (p**2).sum() ** 2
    m = row_metrics(z[None])
    assert m.jacobian_fro[0] ** 2 == pytest.approx(closed, rel=1e-9, abs=1e-15)
    assert m.jacobian_fro[0] == pytest.approx(np.linalg.norm(want), rel=1e-10)
    # symmetric, rows sum to 0; entries at most 1/4, the diagonal dominating its row
    np.testing.assert_allclose(want, want.T, atol=1e-15)
    np.testing.assert_allclose(want.sum(axis=1), 0.0, atol=1e-15)
    quoted("`|p_i p_j| <= p_i (1 - p_i)`")
    off = np.abs(want - np.diag(np.diag(want)))
    assert np.all(off <= np.diag(want)[:, None] + 1e-15) and np.abs(want).max() <= 0.25
    assert m.jacobian_max_abs[0] == pytest.approx(np.abs(want).max(), rel=1e-10)


@pytest.mark.parametrize("n", [2, 3, 8, 64, 1000])
def test_a_flat_row_has_size_sqrt_n_minus_1_over_n(n: int) -> None:
    quoted("`(n - 1)/n^2`, so the size of a perfectly flat row is `sqrt(n - 1)/n` (0.331 for n = 8)")
    size = row_metrics(np.zeros((1, n))).jacobian_fro[0]
    assert size == pytest.approx(math.sqrt(n - 1) / n, rel=1e-12)
    assert size**2 == pytest.approx((n - 1) / n**2, rel=1e-12)
    if n == 8:
        assert f"{size:.3f}" == "0.331"


@pytest.mark.parametrize("z", ROWS[4:], ids=lambda z: f"n{z.size}")
def test_the_size_in_units_of_E(z: np.ndarray) -> None:
    """The cancellation-free form the engine uses: ||J||^2 / E^2 with v_i = p_i / E."""
    quoted("`||J||^2 / E^2 = p_max^2 + sum v_i^2 (1 - p_i)^2 + 2 p_max^2 sum v_i^2 + "
           "E^2 sum_{i != j} v_i^2 v_j^2`")
    p = softmax(z)
    k = int(np.argmax(p))
    others = np.delete(p, k)
    e = others.sum()
    v = others / e
    pairs = (v**2).sum() ** 2 - (v**4).sum()  # sum over i != j of v_i^2 v_j^2
    ratio = p[k] ** 2 + (v**2 * (1 - others) ** 2).sum() + 2 * p[k] ** 2 * (v**2).sum() + e**2 * pairs
    assert math.sqrt(ratio) * e == pytest.approx(row_metrics(z[None]).jacobian_fro[0], rel=1e-10)


@pytest.mark.parametrize("z", ROWS, ids=lambda z: f"n{z.size}")
def test_the_size_is_the_gain_for_an_isotropic_upstream_gradient(z: np.ndarray) -> None:
    """E|J g|^2 = ||J||_F^2 for g with independent unit entries: trace(J^T J)."""
    quoted("`E|J g|^2 = ||J||_F^2`")
    jac = jacobian(softmax(z))
    g = RNG.normal(size=(20_000, z.size))
    mean_sq = ((g @ jac.T) ** 2).sum(axis=1)
    fro2 = float((jac**2).sum())
    assert mean_sq.mean() == pytest.approx(fro2, abs=5 * mean_sq.std() / math.sqrt(g.shape[0]) + 1e-30)
    assert np.trace(jac.T @ jac) == pytest.approx(fro2, rel=1e-12)


@pytest.mark.parametrize(("n", "d_k", "rule"), [(2, 4, "none"), (8, 16, "sqrt"), (5, 64, "dk"),
                                                (16, 32, "sqrt")])
def test_the_chain_rule_for_the_query_matches_autograd(n: int, d_k: int, rule: str) -> None:
    """dL/dz = J g, dL/ds = (1/c) J g, dL/dq = (1/c) sum_j (J g)_j k_j, with torch's autograd as
    the judge (any upstream gradient g)."""
    torch = pytest.importorskip("torch")
    for formula in ("dL/dz = J g", "dL/ds = (1/c) J g", "dL/dq = (1/c) sum_j (J g)_j k_j"):
        quoted(formula)
    c = {"none": 1.0, "sqrt": math.sqrt(d_k), "dk": float(d_k)}[rule]
    gen = torch.Generator().manual_seed(n * d_k)
    q = torch.randn(d_k, dtype=torch.float64, generator=gen, requires_grad=True)
    k = torch.randn(n, d_k, dtype=torch.float64, generator=gen)
    upstream = torch.randn(n, dtype=torch.float64, generator=gen)  # g = dL/dp
    p = torch.softmax((k @ q) / c, dim=0)
    (p * upstream).sum().backward()
    pn, g = p.detach().numpy(), upstream.numpy()
    jg = jacobian(pn) @ g
    by_hand = (jg[:, None] * k.numpy()).sum(axis=0) / c
    np.testing.assert_allclose(q.grad.numpy(), by_hand, rtol=1e-10, atol=1e-14)
    # the part of g shared by every key is ignored (rows of J sum to 0): shift invariance
    np.testing.assert_allclose(jacobian(pn) @ (g + 3.7), jg, atol=1e-12)


def test_a_row_shift_changes_nothing_and_a_scale_does() -> None:
    quoted("`softmax(z + a) = softmax(z)`")
    z = RNG.normal(size=(5, 9)) * 3
    np.testing.assert_allclose(softmax(z + 123.4), softmax(z), rtol=1e-10)
    assert not np.allclose(softmax(2 * z), softmax(z))


# docs/guide/real_model.md, "Auditing the model you deploy": closed forms and the round trip

GUIDE = (Path(__file__).resolve().parents[1] / "docs/guide/real_model.md").read_text(
    encoding="utf-8")


def _in_guide(text: str) -> str:
    assert text in GUIDE, f"docs/guide/real_model.md no longer prints {text!r}"
    return text


def test_the_port_audit_factors_the_guide_prints() -> None:
    """Each factor is the closed form of the bug it names (the port tests find each of them)."""
    ln40 = math.log(40)
    _in_guide("(0.1 ln 40 + 1)² = 1.874")
    assert f"{(0.1 * ln40 + 1) ** 2:.3f}" == "1.874"
    _in_guide("1.874 / 1.590 = 1.179")  # V2-Lite: mscale = mscale_all_dim = 0.707
    assert f"{(1 + 0.0707 * ln40) ** 2:.3f}" == "1.590"
    assert f"{((1 + 0.1 * ln40) / (1 + 0.0707 * ln40)) ** 2:.3f}" == "1.179"
    _in_guide("x1.225")  # query_pre_attn_scalar 12 with head_dim 8: 1/sqrt(8) for 1/sqrt(12)
    assert f"{math.sqrt(12 / 8):.3f}" == "1.225"
    _in_guide("x1.414")  # Granite's attention_multiplier 0.25 replaced by 1/sqrt(8)
    assert f"{8**-0.5 / 0.25:.3f}" == "1.414"
    _in_guide("(x0.6)")  # a cap of 30 where the source caps at 50
    assert 30 / 50 == 0.6


def test_the_round_trip_table_is_the_zoo_documented_scales() -> None:
    """The guide's round-trip rows are the zoo's documented scales (from the papers and configs),
    which tests/engine/probe/port/test_onnx_audit.py finds in every layer of each export."""
    from engine.probe.zoo import ZOO

    doc = {e.name: e for e in ZOO}
    rows = {"BERT": ("BERT", 2), "GPT-2, `scale_attn_by_inverse_layer_idx`":
            ("GPT-2, scale_attn_by_inverse_layer_idx", 3),
            "Llama, GQA 4q/2kv, RoPE": ("Llama", 2)}
    for label, (name, layers) in rows.items():
        values = ", ".join(f"{doc[name].documented_at(i):.4g}" for i in range(layers))
        _in_guide(f"| {label} | {values} |")
    _in_guide(f"| T5: encoder, decoder, cross-attention | {doc['T5'].documented_at(0):.4g} in all "
              "six |")
    # Gemma 2 scaled by query_pre_attn_scalar^-1/2 = head_dim^-1/2: s sqrt(d_k) = sqrt(8 / 8)
    _in_guide(f"| Gemma 2, `query_pre_attn_scalar` = head width, soft-cap 50 | "
              f"{math.sqrt(8 / 8):.4g}, {math.sqrt(8 / 8):.4g} |")
