"""engine.probe.coverage on small torch modules written here (no transformers model): which
modules are attention modules by their direct children's names, and which of them the audit
reports as not seen, with which words."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from engine.probe.coverage import NotSeen, attention_modules, not_seen  # noqa: E402


class Conv1D(nn.Module):
    """GPT-2's transposed linear layer, by its class name."""

    def __init__(self, shape=(4, 12)) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(shape))


class Attn(nn.Module):
    def __init__(self, **children: nn.Module) -> None:
        super().__init__()
        for name, child in children.items():
            setattr(self, name, child)


def _lin() -> nn.Module:
    return nn.Linear(4, 4)


def _names(net) -> list[str]:
    return [name for name, _m in attention_modules(net)]


@pytest.mark.parametrize("query, key", [("q_proj", "k_proj"), ("query", "key"), ("Wq", "Wk"),
                                        ("q_a_proj", "kv_a_proj_with_mqa"), ("to_q", "to_kv"),
                                        ("q_attn", "kv_proj")])
def test_a_query_and_a_key_projection_make_an_attention_module(query, key) -> None:
    net = nn.Sequential(Attn(**{query: _lin(), key: _lin()}))
    assert _names(net) == ["0"]


@pytest.mark.parametrize("fused", ["qkv", "c_attn", "query_key_value", "Wqkv", "in_proj",
                                   "W_pack", "to_qkv"])
def test_one_fused_projection_makes_an_attention_module(fused) -> None:
    assert _names(nn.Sequential(Attn(**{fused: _lin()}))) == ["0"]
    # GPT-2's Conv1D is a projection too; a 1-D weight of that class name is not
    assert _names(nn.Sequential(Attn(**{fused: Conv1D()}))) == ["0"]
    assert _names(nn.Sequential(Attn(**{fused: Conv1D((12,))}))) == []


@pytest.mark.parametrize("children", [
    {"q_proj": "lin"},  # a query alone
    {"k_proj": "lin", "v_proj": "lin"},  # a key alone
    {"q_proj": "norm", "k_proj": "lin"},  # a query that is no projection
    {"q_proj": "lin", "k_proj": "norm"},
    {"c_attn": "norm"},
    {"v_proj": "lin", "o_proj": "lin", "proj": "lin"},
])
def test_what_is_not_an_attention_module(children) -> None:
    made = {n: _lin() if kind == "lin" else nn.LayerNorm(4) for n, kind in children.items()}
    assert _names(nn.Sequential(Attn(**made))) == []


def test_only_direct_children_count_and_every_module_is_listed_in_order() -> None:
    """Projections one level down make their parent the attention module, not the grandparent;
    two attention modules are both listed, in the model's order."""
    inner = Attn(q_proj=_lin(), k_proj=_lin())
    outer = Attn(self_attn=inner, o_proj=_lin())
    net = nn.Sequential(outer, Attn(qkv=_lin()))
    assert _names(net) == ["0.self_attn", "1"]
    pairs = attention_modules(net)
    assert pairs[0][1] is inner and pairs[1][1] is net[1]


@pytest.mark.parametrize("marker", ["A_log", "dt_proj", "dt_bias"])
def test_a_state_space_mixer_is_not_one_by_a_parameter_or_a_child(marker) -> None:
    mixer = Attn(in_proj=_lin(), q_proj=_lin(), k_proj=_lin())
    if marker == "dt_proj":
        mixer.dt_proj = _lin()
    else:
        mixer.register_parameter(marker, nn.Parameter(torch.zeros(4)))
    assert _names(nn.Sequential(mixer)) == []
    # a hybrid (Jamba): the attention layer after a mixer is still listed
    assert _names(nn.Sequential(mixer, Attn(q_proj=_lin(), k_proj=_lin()))) == ["1"]
    # a buffer of that name, or the marker one level down, does not make it a mixer
    other = Attn(in_proj=_lin())
    other.register_buffer(marker, torch.zeros(4))
    holder = Attn(qkv=_lin(), block=Attn(**{"dt": Attn(**{marker: _lin()})}))
    assert _names(nn.Sequential(other, holder)) == ["0", "1"]


def _tap(seen: list, ran: list) -> NS:
    return NS(unique_modules=lambda: list(seen), ran={id(m) for m in ran})


def test_not_seen_names_each_unseen_module_and_why() -> None:
    a, b, c = Attn(q=_lin(), k=_lin()), Attn(qkv=_lin()), Attn(c_attn=_lin())
    net = nn.Sequential(a, b, c)
    out = not_seen(_tap([a], [a, b]), net)
    assert out == (
        NotSeen("1", "Attn", "Attn computes attention inside its own forward, outside "
                "transformers' attention interface, and the lab has no adapter for it"),
        NotSeen("2", "Attn", "Attn did not run in a forward pass on token ids"))
    assert not_seen(_tap([a, b, c], []), net) == ()


def test_a_module_inside_or_around_a_seen_site_is_the_site() -> None:
    """A site's own projections' parent inside it, or a wrapper around it, is not reported; a
    sibling whose name merely starts with the site's name is."""
    inner = Attn(q_proj=_lin(), k_proj=_lin())
    site = Attn(attn=inner, qkv=_lin())
    wrapper = Attn(layer=Attn(qkv=_lin()), q_proj=_lin(), k_proj=_lin())
    net = nn.Sequential(*[nn.Identity() for _ in range(10)], site)  # "10": starts with "1"
    net[1] = Attn(qkv=_lin())
    assert _names(net) == ["1", "10", "10.attn"]
    out = not_seen(_tap([net[1]], []), net)
    assert [m.name for m in out] == ["10", "10.attn"]
    out = not_seen(_tap([site], []), net)
    assert [m.name for m in out] == ["1"]
    seen_inside = nn.Sequential(wrapper)
    assert _names(seen_inside) == ["0", "0.layer"]
    assert not_seen(_tap([wrapper.layer], []), seen_inside) == ()
    assert not_seen(_tap([wrapper], []), seen_inside) == ()

