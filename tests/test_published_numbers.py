"""Every number the tour and docs/SCIENCE.md state is checked: a ``reproduce`` claim published in
that file (resources/claims.json), a parameter of the step, or a closed form / definition listed
here with the test or reason that backs it. A new figure written into a text without its claim
fails here."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: a number as written: 22.6, 65,536, 1.9e-04, 3.4·10⁻⁴ (not the 22 of "ViT-22B" or the 2 of "k2")
NUMBER = re.compile(r"(?<![\w.·⁻^/])(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?(?:e[-+]?\d+)?)"
                    r"(·10⁻[⁰¹²³⁴⁵⁶⁷⁸⁹]+)?(?![\w²])")
#: years of the cited papers
YEARS = {"2017", "2022", "2023", "2025"}
#: numbers that are definitions or closed forms, not measurements, and what checks them
CLOSED_FORMS = {
    "0.25": "the largest possible Jacobian entry, p(1 - p) <= 1/4 (tests/engine/test_softmax.py)",
    "0.99": "the saturation threshold, a parameter",
    "90": "the accuracy target of `experiment seeds`, a parameter",
    "0.125": "1/sqrt(64), the temperature of unit-spread cosine logits (tests/ui/pages/test_tour.py)",
    "11": "rho sqrt(d_k) = 0.5 sqrt(512) (tests/ui/pages/test_tour.py)",
    "256": "rho d_k = 0.5 * 512; the demo's d_k (tests/ui/pages/test_tour.py)",
    "0.635": "needle weight 1/(1 + 7 e^(-2.5)) (test_the_length_steps_claims)",
    "0.0233": "needle weight at n = 512 (test_the_length_steps_claims)",
    "1.9e-04": "needle weight at n = 65,536 (test_the_length_steps_claims)",
    "0.3367": "1/(0.43 ln 1000), SSMax as a scale (test_the_length_steps_claims)",
    "0.1293": "inspector: 3 among 999 scores of -2 (test_the_length_steps_claims)",
    "0.9428": "inspector: 3 among 9 scores of -2 (test_the_length_steps_claims)",
    "0.9996": "inspector: 3, -2*999 at scale 0.3367 (test_the_length_steps_claims)",
    "64": "a head width (d_model 512 over 8 heads), a parameter",
    "512": "a head or model width, a parameter",
    "128": "claimed: the pooled variance with a key mean (tour.means.pooled_var)",
    "65,536": "a number of keys, a parameter",
    "999": "an inspector input (3, -2*999)",
    "1000": "an inspector input's length",
    "4.98": "5 tanh(16/5), a soft-capped logit (test_the_scale_control_steps_claims)",
    "0.0066": "1 - tanh^2(16/5), the cap's slope (test_the_scale_control_steps_claims)",
    "0.051": "p(1 - p) of the inspector example's target (test_the_scale_control_steps_claims)",
    "13.2": "8 e^(1/2), the keys' expected sum (test_the_scale_control_steps_claims)",
    "7.4": "e^2, a sink logit of 2 (test_the_scale_control_steps_claims)",
    "0.36": "e^2 / (e^2 + 8 e^(1/2)) (test_the_scale_control_steps_claims)",
}
SMALL = 16  #: integers up to this are counts and inputs (8 keys, 16 seeds, 10 steps, √4 = 2)
#: docs/SCIENCE.md only: properties of floating point and parameters of the lab
NUMERICS = {
    "1e-3": "the demo's learning rate, a parameter",
    "1e6": "the score size the stable softmax is tested at (tests/engine/test_softmax.py)",
    "1.1e-16": "half the float64 epsilon: where 1 - p_max rounds to 0",
    "6e-8": "half the float32 epsilon",
    "5e-4": "half the float16 epsilon",
    "1e-154": "sqrt of the smallest normal float64: squaring below it underflows",
    "1e-304": "the most saturated rows of the mpmath comparison (tests/engine/test_softmax.py)",
    "4.5": "the standard errors the tests allow, a parameter",
}


def _claimed(where: str) -> set[str]:
    claims = json.loads((ROOT / "resources" / "claims.json").read_text(encoding="utf-8"))["claims"]
    return {c.get("printed") or c["published"] for c in claims if c["where"].startswith(where)}


def _unchecked(text: str, allowed: set[str]) -> list[str]:
    out = []
    for m in NUMBER.finditer(text):
        n = m.group(0)
        if n in allowed or n in YEARS or n in CLOSED_FORMS:
            continue
        if n.isdigit() and int(n) <= SMALL:
            continue
        out.append(n)
    return out


def _params(config: dict) -> set[str]:
    vals = set()
    for v in config.values():
        for x in v if isinstance(v, list) else [v]:
            if isinstance(x, (int, float)) and not isinstance(x, bool):
                vals |= {f"{x:g}", f"{x:,}", str(x)}
    return vals


def test_every_number_of_the_tour_is_claimed_or_a_checked_closed_form() -> None:
    from ui.pages.tour.steps import load_steps

    claimed = _claimed("resources/tour.json")
    bad = []
    for step in load_steps():
        texts = [step.text] + ([step.question.ask, step.question.explain] if step.question else [])
        for text in texts:
            for n in _unchecked(text, claimed | _params(step.config)):
                bad.append(f"{step.title}: {n}")
    assert not bad, "numbers without a claim in resources/claims.json:\n" + "\n".join(bad)


def _prose(markdown: str) -> str:
    """docs/SCIENCE.md without code blocks, inline code, table rows of the worked examples and
    the references (formulas and identifiers, not figures)."""
    text = re.sub(r"```.*?```", " ", markdown, flags=re.S)
    text = re.sub(r"`[^`]*`", " ", text)
    text = text.split("## References")[0]
    return text


def test_every_figure_of_the_science_notes_is_claimed() -> None:
    """Decimal figures (measured values) of docs/SCIENCE.md's prose and tables are claims."""
    from tests.engine.test_softmax import WORKED

    text = _prose((ROOT / "docs/SCIENCE.md").read_text(encoding="utf-8"))
    # the worked examples' exact values are checked by test_docs.py against the softmax tests
    worked = {v for _scores, weights, entry in WORKED for v in (*weights, entry)}
    claimed = _claimed("docs/SCIENCE.md") | worked | set(NUMERICS)
    bad = [n for n in _unchecked(text, claimed) if "." in n or "e" in n]
    assert not bad, "figures without a claim in resources/claims.json: " + ", ".join(bad)
