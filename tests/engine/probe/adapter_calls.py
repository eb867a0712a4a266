"""What an adapter reports, checked against the model by hand (the adapters' tests share it).

An adapter of inline attention (engine/probe/adapters*.py) tells the audit, per call, the q and
k that meet in the product, the mask, the additive terms, the product's factor and the
probabilities. :func:`calls` runs a model once under its tap and keeps every report;
:func:`softmax_of` recomputes the probabilities from a report's q, k, mask, bias and factor with
torch in float64 (its own code, not the adapter's), which must give the model's own
probabilities: a wrong head split, a swapped q and k, a missing mask or a wrong factor does not.
The tests compute q and k from the model's weights themselves (:func:`heads`).
"""

from __future__ import annotations

from typing import Any

LOW = -3.4028234663852886e38
#: a tiny BERT-like config's sizes (d = 32 / 4 = 8)
BERT_SIZES = dict(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=64, max_position_embeddings=64)


def calls(loaded: Any, inputs: dict[str, Any], modifiers: dict[int, Any] | None = None,
          net: Any = None) -> tuple[list[Any], Any, dict[int, Any]]:
    """(the reports in call order, the model's output, {id(attention module): its own output})
    of one forward pass of ``loaded.model`` (or ``net``) on ``inputs`` under its tap."""
    import torch

    net = loaded.model if net is None else net
    seen: list[Any] = []
    outs: dict[int, Any] = {}
    hooks = [m.register_forward_hook(lambda mod, _a, out: outs.__setitem__(id(mod), out))
             for m in loaded.tap.unique_modules()]
    try:
        with torch.no_grad(), loaded.tap.active(seen.append, modifiers):
            out = net(**inputs)
    finally:
        for h in hooks:
            h.remove()
    return seen, out, outs


def seen_in_pass(loaded: Any, inputs: dict[str, Any], watch: dict[Any, Any],
                 inputs_of: bool = False) -> dict[Any, Any]:
    """{key: the first output (or, ``inputs_of``, the first positional input or hidden_states)
    of ``watch[key]``, a module} in one plain forward pass of ``loaded.model``; the hooks run
    first, before an adapter's own, and are removed again."""
    import torch

    seen: dict[Any, Any] = {}

    def keep(key: Any) -> Any:
        def pre(_m: Any, args: Any, kw: dict[str, Any]) -> None:
            if key not in seen:
                seen[key] = (args[0] if args else kw["hidden_states"]).detach().clone()

        def post(_m: Any, _a: Any, out: Any) -> None:
            if key not in seen:  # (I-BERT's quantizers return (output, scale))
                seen[key] = (out[0] if isinstance(out, tuple) else out).detach().clone()
        return pre if inputs_of else post

    hooks = [(m.register_forward_pre_hook(keep(key), with_kwargs=True, prepend=True)
              if inputs_of else m.register_forward_hook(keep(key), prepend=True))
             for key, m in watch.items()]
    try:
        with torch.no_grad():
            loaded.model(**inputs)
    finally:
        for h in hooks:
            h.remove()
    return seen


def heads(x: Any, h: int) -> Any:
    """(batch, heads, tokens, d) of a (batch, tokens, h * d) projection: head i its i-th block."""
    b, n, w = x.shape
    return x.reshape(b, n, h, w // h).permute(0, 2, 1, 3)


def additive(mask: Any) -> Any:
    """A mask as an additive float64 term (a boolean one: True visible)."""
    import torch

    if mask is None:
        return 0.0
    if mask.dtype == torch.bool:
        return torch.where(mask, 0.0, LOW).double()
    return mask.double()


def softmax_of(call: Any, factor: float = 1.0) -> Any:
    """softmax(factor * scaling * q k^T + bias + mask), float64, a key head per query group."""
    import torch

    q, k = call.query.double(), call.key.double()
    if k.shape[1] != q.shape[1]:
        k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)
    s = factor * call.extra["scaling"] * (q @ k.transpose(-1, -2))
    if call.bias is not None:
        s = s + call.bias.double()
    s = (s + additive(call.mask)).clamp(min=LOW)
    return torch.softmax(s, dim=-1)


def assert_softmax(call: Any, factor: float = 1.0, weight: float = 1.0, atol: float = 1e-5,
                   rows: Any = None) -> None:
    """The report's probabilities are ``weight`` x the softmax of its own q, k, mask, bias and
    factor (``rows``: a boolean (tokens,) of the query rows to compare, default all)."""
    import torch

    want = weight * softmax_of(call, factor)
    got = call.weights.double()
    if rows is not None:
        want, got = want[..., rows, :], got[..., rows, :]
    assert got.shape == want.shape, (got.shape, want.shape)
    err = (got - want).abs().max().item()
    assert err < atol, f"probabilities {err:.3g} from the softmax of the reported q.k"
    assert torch.isfinite(got).all()


def factor_on_q(loaded: Any, inputs: dict[str, Any], exact: bool = True,
                rows: Any = None) -> tuple[list[Any], Any, list[Any]]:
    """(the plain reports, the plain output, the reports with q.k x 2 at site 0): the reported
    q and k are those before the factor, and (``exact``) the probabilities the softmax of
    2 x the reported logits."""
    import torch

    plain, plain_out, _ = calls(loaded, inputs)
    got, _o, _ = calls(loaded, inputs, {0: _modifier(q_factor=2.0)})
    torch.testing.assert_close(got[0].query, plain[0].query)  # (q before the factor)
    torch.testing.assert_close(got[0].key, plain[0].key)
    if exact:
        assert_softmax(got[0], factor=2.0, rows=rows)
    return plain, plain_out, got


def _modifier(**kw: float) -> Any:
    from engine.probe.tap import Modifier

    return Modifier(**kw)
