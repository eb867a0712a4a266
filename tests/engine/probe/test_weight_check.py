"""engine.probe.weight_check on small torch modules (no transformers, no files): the tensors
counted, the projections found inside the attention sites only, every refusal's words."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from engine.errors import ConfigError  # noqa: E402
from engine.probe.weight_check import (  # noqa: E402
    WeightsLoaded,
    check_finite,
    projection_weights,
    weights_loaded,
)


class Conv1D(torch.nn.Module):
    """GPT-2's transposed linear layer (matched by its class name and 2-D weight)."""

    def __init__(self, nx: int, nf: int) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(nx, nf))
        self.bias = torch.nn.Parameter(torch.zeros(nf))


class Attn(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q_proj = torch.nn.Linear(4, 4, bias=False)
        self.k_proj = torch.nn.Linear(4, 4)
        self.norm = torch.nn.LayerNorm(4)  # has a weight, but is no projection


class Fused(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c_attn = Conv1D(4, 12)


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(10, 4)
        self.layers = torch.nn.ModuleList([Attn(), Fused()])
        self.mlp = torch.nn.Linear(4, 4)  # a linear layer outside every site
        self.register_buffer("steps", torch.zeros(3, dtype=torch.long))


def test_projection_weights_are_the_linear_layers_inside_the_sites() -> None:
    net = Net()
    sites = [net.layers[0], net.layers[1]]
    assert projection_weights(net, sites) == [
        "layers.0.q_proj.weight", "layers.0.k_proj.weight", "layers.1.c_attn.weight"]
    assert projection_weights(net, [net.layers[1]]) == ["layers.1.c_attn.weight"]
    assert projection_weights(net, []) == []
    # the whole network as its own site: names without a leading dot
    attn = Attn()
    assert projection_weights(attn, [attn]) == ["q_proj.weight", "k_proj.weight"]


def test_a_conv1d_is_a_projection_only_with_a_2d_weight() -> None:
    net = Fused()
    net.c_attn.weight = torch.nn.Parameter(torch.zeros(12))
    assert projection_weights(net, [net]) == []


def test_every_tensor_loaded() -> None:
    net = Net()
    total = len(net.state_dict())
    assert total == 11  # embed 1, q 1, k 2, norm 2, c_attn 2, mlp 2, steps 1
    w = weights_loaded(net, {"missing_keys": []}, [net.layers[0]], "tiny")
    assert w == WeightsLoaded(11, 11, ())
    assert w.text() == "all 11 of the model's tensors loaded from the folder"
    assert weights_loaded(net, {}, [net.layers[0]], "tiny") == WeightsLoaded(11, 11, ())


def test_tensors_missing_outside_the_projections_are_counted_not_refused() -> None:
    net = Net()
    missing = ["mlp.weight", "embed.weight", "layers.0.norm.bias"]
    w = weights_loaded(net, {"missing_keys": missing}, list(net.layers), "tiny")
    assert w == WeightsLoaded(8, 11, ("embed.weight", "layers.0.norm.bias", "mlp.weight"))
    assert w.text() == ("8 of the model's 11 tensors loaded from the folder (3 initialized at "
                        "random, e.g. embed.weight)")


def test_a_missing_projection_is_refused_naming_the_first_and_the_counts() -> None:
    net = Net()
    missing = ["mlp.bias", "layers.1.c_attn.weight", "layers.0.k_proj.weight"]
    with pytest.raises(ConfigError) as err:
        weights_loaded(net, {"missing_keys": missing}, list(net.layers), "gpt2")
    assert err.value.field == "model"
    assert err.value.message == (
        "the weights hold no layers.0.k_proj.weight (2 of the 3 attention projection weights "
        "are missing, 8 of the model's 11 tensors found): they are not a gpt2 model's, and an "
        "audit of random projections would measure nothing")
    # a projection bias is not a projection weight; a projection outside the sites is ignored
    ok = weights_loaded(net, {"missing_keys": ["layers.0.k_proj.bias", "mlp.weight"]},
                        list(net.layers), "gpt2")
    assert ok.loaded == 9 and ok.missing == ("layers.0.k_proj.bias", "mlp.weight")


def test_check_finite_names_the_first_bad_tensor_and_counts_its_values() -> None:
    net = Net()
    check_finite(net)  # zeros and random values: fine
    with torch.no_grad():
        net.layers[0].k_proj.bias[1] = float("inf")
        net.mlp.weight[0, :3] = float("nan")
    with pytest.raises(ConfigError) as err:
        check_finite(net)
    assert err.value.field == "model"
    assert err.value.message == ("the weight layers.0.k_proj.bias holds 1 non-finite value(s) "
                                 "(NaN or infinity): the audit needs finite weights")
    with torch.no_grad():
        net.layers[0].k_proj.bias[1] = 1.0
    with pytest.raises(ConfigError, match=r"the weight mlp\.weight holds 3 non-finite"):
        check_finite(net)
