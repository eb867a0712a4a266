"""Adapters for the BERT family's inline attention: one hook set, parametrised per family.

BERT's descendants that never moved to transformers' attention interface (Megatron-BERT,
RemBERT, TAPAS, ConvBERT, RoFormer, MPNet, LUKE, I-BERT, SqueezeBERT, BigBird's full
attention, XLM and FlauBERT) all compute, inside one module, ``softmax(q k^T / sqrt(head size)
+ mask [+ terms])`` from a query and a key projection. Forward hooks see every piece without
copying the computation:

* a pre-hook binds the call's arguments (mask, RoFormer's ``sinusoidal_pos``, MPNet's
  ``position_bias``) and numbers the site;
* hooks on the query and key projections keep their first output of the call; a factor on q
  (a planted bug, the what-if) is applied to the *key* projection's output, which only the
  product reads (ConvBERT also feeds the query into its convolution kernels): q.k scales the
  same;
* a factor on the weights multiplies the value projection's output (probabilities x f on their
  way to the values: the same output);
* the probabilities are read where the module hands them to a submodule (its attention
  dropout, identity in eval mode), or, for XLM and FlauBERT whose dropout is functional, from the
  output the module returns when asked for them (the hook asks, and strips them again when the
  caller did not).

Two more read the same way once their layout is undone: Nystromformer divides q and k each by
``head_size ** 0.25`` (1/sqrt(d) on q.k) and computes the exact softmax when ``num_landmarks``
equals ``segment_means_seq_len`` (its default; otherwise its Nystrom approximation is no softmax
over q.k and is refused as such; a factor on the weights also reaches the convolution of the
values it adds); Longformer's sliding-window probabilities come as a band, (batch, tokens,
heads, 2w + 1), unfolded here into the (tokens, tokens) matrix with the window and the padding
it adds as the mask (its global-attention tokens are refused).

Funnel's relative attention reads the same way too: its content score (q + r_w_bias) . k is
q.k plus a term per key, which joins the relative position and token-type scores (computed by
the module's own functions) as the additive term.

A :class:`Family` names, per module class, where those pieces are; :func:`install` installs it.
BigBird swaps its attention module for a full-attention one at the first short input (its
block-sparse attention is refused: it is a random block pattern, not read here), so its hooks
are attached to whichever module runs. DeBERTa's disentangled attention is in
:mod:`engine.probe.adapters_deberta`.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.errors import ConfigError
from engine.probe.install import install_sites
from engine.probe.tap import SiteCall, Tap, active_for

#: model types whose token mixing is no softmax over q.k at all (why, said in the refusal)
NO_SOFTMAX_BERT: dict[str, str] = {
    "yoso": ("approximates attention by LSH collision probabilities (YOSO: Bernoulli sampling "
             "of hashed q and k), not a softmax over q.k"),
    "mra": ("approximates softmax attention by multi-resolution block averages of exp(q.k) "
            "(MRA), its weights no exact softmax over q.k"),
}


@dataclass(frozen=True)
class Family:
    """Where one attention module class keeps the pieces of its product."""

    cls: str  #: the module's class name
    name: str  #: the adapter's name (reported per site)
    q: str = "query"  #: the query projection (its output, or a tuple's first item)
    k: str = "key"
    v: str = "value"
    probs: str | None = "dropout"  #: the submodule the probabilities pass through (None: asked)
    heads: str = "num_attention_heads"
    head_size: str = "attention_head_size"
    mask: str = "attention_mask"  #: the forward's mask argument
    conv: bool = False  #: projections are Conv1d, (batch, channels, tokens) (SqueezeBERT)
    #: the mask holds 1 for a visible key (XLM: (bs, klen) or (bs, qlen, klen)), not additive
    keep_mask: bool = False
    seq_first: bool = False  #: projections see (tokens, batch, width) (Longformer)
    #: what the forward adds or does to q and k before the product (RoPE, a position bias), and
    #: how its probabilities and mask read as (batch, heads, nq, nk): (module, call arguments,
    #: q, k, mask, weights, the planted factor on q.k) -> (q, k, mask, bias, weights, bias kind)
    terms: Callable[..., tuple[Any, Any, Any, Any, Any, str | None]] | None = None
    #: a reason to refuse one call (LUKE's entity-aware queries), or None
    refuse: Callable[[Any, dict[str, Any]], str | None] | None = None


Terms = tuple[Any, Any, Any, Any, Any, "str | None"]


def _rotary(module: Any, args: dict[str, Any], q: Any, k: Any, mask: Any, w: Any,
            _f: float = 1.0) -> Terms:
    """RoFormer rotates q and k by the sinusoidal positions the encoder passes (self-attention)."""
    pos = args.get("sinusoidal_pos")
    if pos is not None and args.get("encoder_hidden_states") is None:
        q, k = module.apply_rotary_position_embeddings(pos, q, k)[:2]
    return q, k, mask, None, w, None


def _mpnet_bias(_m: Any, args: dict[str, Any], q: Any, k: Any, mask: Any, w: Any,
            _f: float = 1.0) -> Terms:
    """MPNet adds the encoder's bucketed relative position bias (shared by the layers)."""
    return q, k, mask, args.get("position_bias"), w, "relative position bias"


def _funnel_terms(module: Any, args: dict[str, Any], q: Any, k: Any, _mask: Any, w: Any,
                  f: float = 1.0) -> Terms:
    """Funnel: the content score is (q + r_w_bias) . k times 1/sqrt(d_head); r_w_bias . k and
    the relative position and token-type scores (the module's own functions, from the scaled
    q) are the additive term, with k as the product used it (x ``f``, a planted factor); its
    mask is 1/0 per key (the model subtracts 1e6 where 0)."""
    import torch

    pos, token_types, keep, cls_mask = args["attention_inputs"]
    qh = (q * module.scale).transpose(1, 2)  # (batch, tokens, heads, d), as the module's
    with torch.no_grad():
        bias = (module.relative_positional_attention(pos, qh, k.shape[2], cls_mask)
                + module.relative_token_type_attention(token_types, qh, cls_mask)
                + module.scale * torch.einsum("nd,bnjd->bnj", module.r_w_bias, k * f)[:, :, None])
    add = None
    if keep is not None:
        add = torch.where(keep[:, None, None] != 0, 0.0, torch.finfo(torch.float32).min)
    return q, k, add, bias, w, "relative position and token-type terms"


def _ibert_refuse(module: Any, _args: dict[str, Any]) -> str | None:
    if getattr(module, "quant_mode", False):
        return ("ibert has no softmax attention: in quant_mode it computes an integer "
                "approximation (IntSoftmax: a polynomial exp, 8-bit probabilities on quantized "
                "q and k), its weights no softmax over q.k; there is no attention scale to "
                "audit (quant_mode false computes the exact softmax)")
    return None


def _nystrom_refuse(module: Any, _args: dict[str, Any]) -> str | None:
    if module.num_landmarks != module.seq_len:
        return (f"nystromformer has no softmax attention: it approximates it by the Nystrom "
                f"method ({module.num_landmarks} landmarks for segment_means_seq_len "
                f"{module.seq_len}), its weights no softmax over q.k; there is no attention "
                "scale to audit")
    return None


def _longformer_refuse(_m: Any, args: dict[str, Any]) -> str | None:
    if args.get("is_global_attn"):
        return ("longformer's global attention tokens are not audited (its sliding-window "
                "attention is): audit a text without global attention")
    return None


def _band(module: Any, args: dict[str, Any], q: Any, k: Any, mask: Any, w: Any,
            _f: float = 1.0) -> Terms:
    """Longformer's sliding-window probabilities, (batch, n, heads, 2w + 1) with column j the
    key i - w + j, as a (batch, heads, n, n) matrix; its mask: keys within the window that are
    not padding (the model pads the text to a multiple of the window), rows of padding empty."""
    import torch

    b, n, h, span = w.shape
    half = module.one_sided_attn_window_size
    keys = torch.arange(n)[:, None] - half + torch.arange(span)[None, :]  # (n, 2w + 1)
    inside = (keys >= 0) & (keys < n)
    full = torch.zeros(b, h, n, n + 1, dtype=w.dtype)
    idx = torch.where(inside, keys, n).expand(b, h, n, span)
    full.scatter_(-1, idx, w.permute(0, 2, 1, 3))
    full = full[..., :n]
    near = (torch.arange(n)[:, None] - torch.arange(n)[None, :]).abs() <= half
    masked = args["is_index_masked"]  # (batch, n) padding
    vis = near[None] & ~masked[:, None, :] & ~masked[:, :, None]
    add = torch.where(vis, 0.0, torch.finfo(torch.float32).min)[:, None]
    return q, k, add, None, full, None


def _luke_refuse(module: Any, args: dict[str, Any]) -> str | None:
    if getattr(module, "use_entity_aware_attention", False) and \
            args.get("entity_hidden_states") is not None:
        return ("LUKE's entity-aware attention (four query projections, one per word/entity "
                "pair) is not audited; audit the words alone")
    return None


FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("MegatronBertSelfAttention", "megatron-bert"),
    Family("RemBertSelfAttention", "rembert"),
    Family("TapasSelfAttention", "tapas"),
    Family("ConvBertSelfAttention", "convbert"),
    Family("BigBirdSelfAttention", "big_bird"),
    Family("RoFormerSelfAttention", "roformer", terms=_rotary),
    Family("MPNetSelfAttention", "mpnet", q="q", k="k", v="v", terms=_mpnet_bias),
    Family("LukeSelfAttention", "luke", refuse=_luke_refuse),
    Family("IBertSelfAttention", "ibert", q="query_activation", k="key_activation",
           v="value_activation", refuse=_ibert_refuse),
    Family("SqueezeBertSelfAttention", "squeezebert", conv=True),
    Family("MultiHeadAttention", "xlm", q="q_lin", k="k_lin", v="v_lin", probs=None,
           heads="n_heads", head_size="head_dim", mask="mask", keep_mask=True),
    Family("FunnelRelMultiheadAttention", "funnel", q="q_head", k="k_head", v="v_head",
           probs="attention_dropout", heads="config.n_head", head_size="config.d_head",
           mask="", terms=_funnel_terms),
    # (q and k each divided by head_size ** 0.25 before the product: 1/sqrt(d) on q.k)
    Family("NystromformerSelfAttention", "nystromformer", probs=None, refuse=_nystrom_refuse),
    Family("LongformerSelfAttention", "longformer", probs=None, heads="num_heads",
           head_size="head_dim", seq_first=True, terms=_band, refuse=_longformer_refuse),
)}
FAMILIES["flaubert"] = FAMILIES["xlm"]


def bert_adapters() -> dict[str, Callable[[Tap, Any], int]]:
    """{model type: installer} of this module's families."""
    from engine.probe.adapters_deberta import install_deberta

    out: dict[str, Callable[[Tap, Any], int]] = {
        mt: (lambda tap, model, fam=fam: install(tap, model, fam)) for mt, fam in FAMILIES.items()}
    out["big_bird"] = install_big_bird
    out["deberta"] = out["deberta-v2"] = install_deberta
    return out


def install(tap: Tap, model: Any, family: Family) -> int:
    return install_sites(tap, model, family.cls, lambda mod: _BertSite(tap, mod, family),
                         family.name)


def install_big_bird(tap: Tap, model: Any) -> int:
    """Hooks on each BigBirdAttention that attach the full-attention family to whichever inner
    module runs (BigBird replaces it at the first input short enough for full attention)."""
    family = FAMILIES["big_bird"]
    done: set[int] = set()

    def attach(outer: Any, _args: Any) -> None:
        if active_for(tap) is None:
            return
        inner = outer.self
        if type(inner).__name__ != family.cls:
            raise ConfigError("model", "big_bird's block-sparse attention (a text longer than "
                              "its full-attention limit) mixes random key blocks; the audit "
                              "reads its full attention only: audit a shorter text")
        if id(inner) not in done:  # (hooks added now still see this call of ``inner``)
            done.add(id(inner))
            _BertSite(tap, inner, family)
            tap.mark_adapter(inner, family.name)
            names = tap._names  # (the tap named the modules it was given: name the new one)
            names[id(inner)] = f"{names.get(id(outer), 'BigBirdAttention')}.self"

    # (the outer module is not marked: the inner one that runs is, when attached)
    return install_sites(tap, model, "BigBirdAttention",
                         lambda mod: mod.register_forward_pre_hook(attach), None)


class _BertSite:
    """The hooks of one attention module; ``state`` carries one call from hook to hook."""

    def __init__(self, tap: Tap, module: Any, family: Family) -> None:
        self.tap, self.module, self.family = tap, module, family
        self.state: dict[str, Any] = {}
        self._signature = inspect.signature(module.forward)
        module.register_forward_pre_hook(self.pre, with_kwargs=True)
        getattr(module, family.q).register_forward_hook(self.keep("q"))
        getattr(module, family.k).register_forward_hook(self.keep("k", factor=True))
        getattr(module, family.v).register_forward_hook(self.scale_values)
        if family.probs is not None:
            getattr(module, family.probs).register_forward_hook(self.probs)
        module.register_forward_hook(self.post)

    def pre(self, _m: Any, args: Any, kwargs: dict[str, Any]) -> Any:
        tap = active_for(self.tap)
        self.state = {}
        if tap is None:
            return None
        bound = self._signature.bind_partial(*args, **kwargs).arguments
        bound = {**bound, **bound.pop("kwargs", {})}
        if self.family.refuse is not None:
            why = self.family.refuse(self.module, bound)
            if why:
                raise ConfigError("model", why)
        self.state = {"site": tap.site_of(self.module), "args": bound}
        if self.family.probs is None:  # ask for the probabilities (XLM's dropout is functional)
            self.state["asked"] = bool(bound.get("output_attentions"))
            where = list(self._signature.parameters).index("output_attentions")
            if len(args) > where:
                return (*args[:where], True, *args[where + 1:]), kwargs
            return args, {**kwargs, "output_attentions": True}
        return None

    def keep(self, part: str, factor: bool = False) -> Callable[[Any, Any, Any], Any]:
        def hook(_m: Any, _args: Any, out: Any) -> Any:
            tap = active_for(self.tap)
            if tap is None or "site" not in self.state or part in self.state:
                return None
            t = out[0] if isinstance(out, tuple) else out
            self.state[part] = t.detach().clone()
            f = tap.modifier(self.state["site"]).q_factor if factor else 1.0
            if f == 1.0 and not self.family.seq_first:
                return None
            # (Longformer divides its query in place: it gets a copy, the projection's output
            # that the tap keeps stays as it was)
            return (t * f, *out[1:]) if isinstance(out, tuple) else out * f
        return hook

    def scale_values(self, _m: Any, _args: Any, out: Any) -> Any:
        tap = active_for(self.tap)
        if tap is None or "site" not in self.state:
            return None
        f = tap.modifier(self.state["site"]).w_factor
        if f == 1.0:
            return None
        return (out[0] * f, *out[1:]) if isinstance(out, tuple) else out * f

    def probs(self, _m: Any, _args: Any, out: Any) -> None:
        if active_for(self.tap) is not None and "site" in self.state:
            self.state["weights"] = out.detach()

    def post(self, _m: Any, _args: Any, out: Any) -> Any:
        tap = active_for(self.tap)
        st, self.state = self.state, {}
        if tap is None or "q" not in st:
            return None
        weights = st.get("weights")
        result = None
        if self.family.probs is None:
            weights = out[1]
            if not st["asked"]:
                result = out[:1]
        if weights is None:
            return result
        f = tap.modifier(st["site"]).w_factor
        if f != 1.0:  # (the values carried it: the output is already scaled)
            weights = weights * f
        fam, m = self.family, self.module
        h, d = _attr(m, fam.heads), _attr(m, fam.head_size)
        q, k = (_heads(st[x].transpose(0, 1) if fam.seq_first else st[x], h, d, fam.conv)
                for x in ("q", "k"))
        bias, kind = None, None
        mask = st["args"].get(fam.mask)
        if fam.keep_mask and mask is not None:
            mask = _additive(mask, q.shape[2])
        if fam.terms is not None:
            q, k, mask, bias, weights, kind = fam.terms(m, st["args"], q, k, mask, weights,
                                                        tap.modifier(st["site"]).q_factor)
        extra: dict[str, Any] = {"scaling": 1.0 / math.sqrt(d)}
        if kind:
            extra["bias_kind"] = kind
        first = out[0] if isinstance(out, tuple) else next(iter(out.values()))
        first = first[0] if isinstance(first, tuple) else first
        tap.observe(SiteCall(st["site"], m, q, k, mask, bias, weights, first, extra))
        return result


def _attr(module: Any, path: str) -> int:
    for part in path.split("."):
        module = getattr(module, part)
    return int(module)


def _heads(t: Any, h: int, d: int, conv: bool) -> Any:
    """(batch, heads, tokens, d) of a projection's output."""
    if conv:  # (batch, channels, tokens)
        b, _c, n = t.shape
        return t.view(b, h, d, n).permute(0, 1, 3, 2)
    b, n, _w = t.shape
    return t.view(b, n, h, d).transpose(1, 2)


def _additive(mask: Any, nq: int) -> Any:
    """XLM's 1/0 mask, (bs, klen) or (bs, qlen, klen), as the additive (bs, 1, qlen, klen)."""
    import torch

    vis = mask != 0
    vis = vis[:, None, None, :] if vis.dim() == 2 else vis[:, None]
    vis = vis.expand(vis.shape[0], 1, nq, vis.shape[-1])
    return torch.where(vis, 0.0, torch.finfo(torch.float32).min)
