"""Does a site's declaration account for every factor its code applies before the product?

The capture measures, per head, the factor between the projections' q.k and the q.k that reaches
the attention function (:meth:`SiteRecord.prescale`: q and k pre-scales, RoPE's cos/sin factor
squared); the call passes the factor it asks the attention function to apply. The declaration
(:mod:`engine.probe.declared`) says what both should be. This module turns the two into the
:class:`Reference` the fitted scale is compared with:

* the declaration's whole factor, when the measured pre-scales are the declared ones (a model
  that keeps its ``scaling`` at 1 and pre-scales q, as ESM, is as declared, not a mismatch);
* the declaration's product factor alone, when q and k are measured where they reach the
  product (QK-norm, MLA): their pre-scales cannot be seen there;
* otherwise the factors the code applies (what it passes times what it multiplied q and k by),
  marked *unknown*: the code applies a factor before the product that nothing in the config
  declares, so a difference between the code and the config is not a finding the audit can back
  (a model that scales q and k each by d^-1/4 by design looks exactly like one that does so by
  mistake). The fit is still compared with those factors: weights that are not what the code
  passes (a planted bug, a broken attention function) are a finding either way.

Pre-scales agree with a declaration within :data:`PRE_TOL`: each of q's and k's factors is the
mean of per-token norm ratios that :func:`~engine.probe.sites.match_projection` accepted only
within ``RATIO_SPREAD_TOL`` of it, so their product is known to twice that.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from engine.probe.declared import Declaration
from engine.probe.sites import RATIO_SPREAD_TOL, SiteRecord

#: relative agreement of a measured pre-scale (q's factor times k's) with a declared one
PRE_TOL = 2 * RATIO_SPREAD_TOL
AT_PRODUCT = ("checked at the product: q and k are not a projection's output there, so factors "
              "applied to them before it are not seen")


@dataclass(frozen=True)
class Reference:
    """What the fit of one site is compared with."""

    value: np.ndarray  #: (H,) the factor on the q.k the fit sees, per head
    known: bool  #: from the declaration (False: from the code's own factors, declared unknown)
    source: str  #: where the value comes from, in words
    why_unknown: str = ""  #: what the declaration does not account for (known: "")
    tol: float = 0.0  #: how well the value itself is known (log; the code's pre-scales)
    note: str = ""  #: where it was checked, when not against the projections
    #: (nq,) the factor q should carry at each query position, relative to the first (a
    #: declared law such as Llama 4's; the code's own factor when the declaration is unknown);
    #: None: one scale for every position
    row_factor: np.ndarray | None = None

    @property
    def median(self) -> float:
        return float(np.median(self.value))


def code_factor(rec: SiteRecord) -> np.ndarray:
    """(H,) the factor the site's code applies to the q.k the fit sees: what it passes to the
    attention function (the eager default 1/sqrt(d) when it passes none) times the pre-scales."""
    passed = rec.d_k**-0.5 if rec.scaling is None else rec.scaling
    return passed * rec.prescale()


def reference(decl: Declaration, rec: SiteRecord) -> Reference:
    """The :class:`Reference` of one site (see the module docstring)."""
    h = rec.n_heads
    if rec.q_ratio is None:  # measured at the product: only the product factor can be checked
        if decl.pre is None:
            return _unknown(rec, f"the module applies its scaling {decl.attr:.4g} before the "
                            "call, and q and k are not a projection's output there")
        note = AT_PRODUCT + (f"; the declared {decl.law.name} is inside q there and is not "
                             "checked" if decl.law is not None else "")
        return Reference(np.full(h, decl.product), True, decl.source, note=note)
    law, f_code, t0 = _position(decl, rec)
    measured = rec.prescale()
    options = ([(decl.pre, "")] if decl.pre is not None else
               [(decl.attr * decl.cos_sin**2, " on q"), (decl.attr**2 * decl.cos_sin**2,
                                                          " on q and on k")])
    at0 = 1.0 if decl.law is None else float(decl.law.factor(np.array([t0]))[0])
    for pre, where in options:
        if np.all(np.abs(np.log(measured / (pre * at0))) <= PRE_TOL):
            if law is None and f_code is not None:  # the code's position factor, undeclared
                break
            src = decl.source + where + (f" x {decl.law.name}" if decl.law else "")
            return Reference(np.full(h, decl.product * pre * at0), True, src, row_factor=law,
                             note=_law_note(law, f_code))
    want = options[0][0] if decl.pre is not None else None
    said = (f"the declaration accounts for x{want * at0:.4g}" if want is not None else
            f"the module's scaling {decl.attr:.4g} on q or on q and k does not explain it")
    why = f"the code multiplies q.k by x{_span(measured)} before the product ({_sides(rec)})"
    if law is None and f_code is not None:
        why += (f", q by x{np.nanmin(f_code):.4g} to x{np.nanmax(f_code):.4g} with the "
                "position, which no config key declares")
    return _unknown(rec, f"{why}; {said}")


def _position(decl: Declaration, rec: SiteRecord
              ) -> tuple[np.ndarray | None, np.ndarray | None, int]:
    """(the declared law per query position relative to the first query with a q, the code's
    factor the same way, that first position); None where there is none."""
    n = rec.q.shape[1]
    f = rec.q_position
    t0 = int(np.flatnonzero(np.isfinite(f))[0]) if f is not None else 0
    law = None
    if decl.law is not None:
        values = decl.law.factor(np.arange(n))
        law = values / values[t0]
    if f is not None and law is not None:  # a token without q carries no factor: the law's
        f = np.where(np.isfinite(f), f, law)
    return law, (None if f is None else np.where(np.isfinite(f), f, 1.0)), t0


def _law_note(law: np.ndarray | None, f_code: np.ndarray | None) -> str:
    """What the code's q carries with the position where the declared law says otherwise."""
    if law is None or (np.all(np.abs(law - 1.0) <= PRE_TOL) and f_code is None):
        return ""
    code = np.ones_like(law) if f_code is None else f_code
    if np.all(np.abs(np.log(code / law)) <= PRE_TOL):  # (a token without q: 1 in f_code)
        return ""
    what = ("no factor with the position" if f_code is None else
            f"x{code.min():.4g} to x{code.max():.4g} with the position")
    return (f"q carries {what}; the declared law gives x{law.min():.4g} to x{law.max():.4g} over "
            "these positions")


def _unknown(rec: SiteRecord, why: str) -> Reference:
    tol = PRE_TOL if rec.q_ratio is not None else 0.0
    f = rec.q_position
    rows = None if f is None else np.where(np.isfinite(f), f, 1.0)
    return Reference(code_factor(rec), False, "the factors the code applies", why, tol,
                     row_factor=rows)


def _span(x: np.ndarray) -> str:
    lo, hi = float(x.min()), float(x.max())
    return f"{lo:.4g}" if math.isclose(lo, hi, rel_tol=PRE_TOL) else f"{lo:.4g} to {hi:.4g}"


def _sides(rec: SiteRecord) -> str:
    parts = []
    for side, r in (("q", rec.q_ratio), ("k", rec.k_ratio)):
        if r is not None and np.any(np.abs(r - 1.0) > RATIO_SPREAD_TOL):
            parts.append(f"{side} x{_span(r)}")
    return ", ".join(parts) or "q and k as the projections made them"
