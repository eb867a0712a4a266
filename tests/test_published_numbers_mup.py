"""Every measured figure of docs/width_transfer.md (the coord check's slopes, the best learning
rates, their shifts, the losses at a fixed learning rate) is a claim in resources/claims.json, as
tests/test_published_numbers.py requires of the tour and the science notes."""

from __future__ import annotations

import json
import math
import re

from tests.test_published_numbers import ROOT, _claimed, _unchecked

DOC = "docs/width_transfer.md"
#: decimal numbers of the page that are not measurements, and what they are
NOT_MEASURED = {
    "2203.03466": "the arXiv number of Tensor Programs V",
    "6.4·10⁻²": "the largest learning rate of the grid (checked below)",
    "2.1": "log10 of the grid's span, 6.4e-2 / 5e-4 (checked below)",
    "5.3": "CPU-seconds per job on a shared machine: a timing, not a claim",
}


def test_every_figure_of_the_width_transfer_page_is_claimed() -> None:
    text = (ROOT / DOC).read_text(encoding="utf-8")
    text = re.sub(r"```.*?```", " ", text, flags=re.S)
    text = re.sub(r"`[^`]*`", " ", text)  # commands and identifiers
    claimed = _claimed(DOC)
    claimed |= {c.lstrip("+-") for c in claimed}  # "-0.55" is printed as "-0.55" or "0.55"
    bad = [n for n in _unchecked(text, claimed | set(NOT_MEASURED)) if "." in n or "e" in n]
    assert not bad, "figures without a claim in resources/claims.json: " + ", ".join(bad)


def test_the_grid_the_page_describes_is_the_experiments() -> None:
    spec = json.loads((ROOT / "resources/experiments/width_transfer.json").read_text("utf-8"))
    lrs = spec["axes"]["lr"]
    assert (min(lrs), max(lrs)) == (0.0005, 0.064) and len(lrs) == 8
    assert f"{math.log10(max(lrs) / min(lrs)):.1f}" == "2.1"
    assert spec["axes"]["d_model"] == [16, 32, 64, 128] and spec["axes"]["seed"] == [0, 1, 2]
