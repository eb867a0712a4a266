"""A quantized GGUF file's weights against the source, within what the quantization rounds away:
an intact Q8_0 file has no weights finding (and its largest difference uses most of the bound,
so the bound is not loose); a file with two q rows swapped in one layer is found in that layer."""

from __future__ import annotations

import copy

import numpy as np
import pytest

pytest.importorskip("gguf")
pytest.importorskip("transformers")

from engine.probe.port.gguf_audit import audit_gguf
from engine.probe.port.gguf_weights import tolerance
from engine.probe.port.gguf_write import write_gguf
from engine.probe.port.onnx_audit import PortConfig
from engine.probe.port.roundtrip import zoo_model
from engine.probe.zoo import zoo_ids
from engine.snapshots import last_result


def test_the_q8_0_bound_by_hand() -> None:
    """A block of 32 whose largest |x| is 127 * 0.01: the step d = 0.01 is stored as float16
    (0.0099983215...), so an element may be off by d/2 + 127 |d - f16(d)| (+ 2^-10 d)."""
    x = np.linspace(-1.27, 1.27, 32)
    d16 = float(np.float16(0.01))
    want = 0.005 + 127 * abs(0.01 - d16) + 0.01 * 2**-10
    np.testing.assert_allclose(tolerance("Q8_0", x[None]), want, rtol=1e-12)
    # a row that is not whole blocks has no Q8_0 bound; float types: half an ulp
    assert tolerance("Q8_0", np.ones((2, 48))) is None
    assert tolerance("F16", np.array([1.0]))[0] == pytest.approx(2**-11 * (1 + 1e-6) + 2**-25)
    assert tolerance("Q4_K", np.ones((1, 256))) is None


@pytest.fixture(scope="module")
def llama():
    return zoo_model("Llama", {"num_key_value_heads": 2})


def _audit(path, loaded):
    return last_result(audit_gguf(PortConfig(str(path)), loaded, ids=zoo_ids()), "the audit")


def test_an_intact_q8_0_file_has_no_weights_finding(tmp_path, llama) -> None:
    res = _audit(write_gguf(llama.model, tmp_path / "q8.gguf", qtype="Q8_0"), llama)
    assert res.findings == ()
    assert [r.state for r in res.layers] == ["as the source"] * llama.n_sites
    worst = res.meta["weights"]["largest_diff_over_rounding"]
    # every layer's largest difference is within the bound, and uses over half of it
    assert all(0.5 < v <= 1.0 for v in worst.values()), worst


def test_a_row_swap_in_a_q8_0_file_is_found_in_its_layer(tmp_path, llama) -> None:
    import torch

    net = copy.deepcopy(llama.model)
    with torch.no_grad():
        w = net.layers[1].self_attn.q_proj.weight
        w[[3, 17]] = w[[17, 3]].clone()
    res = _audit(write_gguf(net, tmp_path / "swap.gguf", qtype="Q8_0"), llama)
    assert len(res.findings) == 1
    assert res.findings[0].startswith("layer 1: the file's layers.1.self_attn.q_proj.weight "
                                      "differs from the source's by")
    assert res.findings[0].endswith("what its Q8_0 storage rounds away")
