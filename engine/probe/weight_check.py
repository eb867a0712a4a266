"""Are the weights the audit runs on the model's own, and finite?

An audit of random weights reads as a full report (every head fitted, verdicts in words) of a
model nobody trained: a folder whose weights hold none or few of the model's tensors, or a
``model_type`` spoofed onto another architecture's weights (transformers warns that the missing
tensors are "newly initialized", and the lab hides that warning). So the load counts the model's
tensors the folder held, and refuses, in one line, a model missing any attention projection: the
q.k the audit measures would be random. Non-finite weights are refused too: every fit of a NaN
is NaN, and a report of them is not an audit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.errors import ConfigError


@dataclass(frozen=True)
class WeightsLoaded:
    """How many of the model's tensors came from the folder."""

    loaded: int
    total: int
    missing: tuple[str, ...]  #: the model's tensors the folder did not hold (initialized)

    def text(self) -> str:
        if not self.missing:
            return f"all {self.total} of the model's tensors loaded from the folder"
        return (f"{self.loaded} of the model's {self.total} tensors loaded from the folder "
                f"({len(self.missing)} initialized at random, e.g. {self.missing[0]})")


def check_finite(net: Any) -> None:
    """Refuse a model with a NaN or infinite weight, naming the first such tensor."""
    import torch

    for name, p in net.named_parameters():
        if p.is_floating_point() and not bool(torch.isfinite(p).all()):
            bad = int((~torch.isfinite(p)).sum())
            raise ConfigError("model", f"the weight {name} holds {bad} non-finite value(s) (NaN "
                              "or infinity): the audit needs finite weights")


def projection_weights(net: Any, site_modules: list[Any]) -> list[str]:
    """The names of the q/k/v projection weights inside the attention sites."""
    from engine.probe.tap import _is_projection

    wanted = {id(m) for m in site_modules}
    names = []
    for name, mod in net.named_modules():
        if id(mod) not in wanted:
            continue
        for sub, child in mod.named_modules():
            if sub and _is_projection(child):
                names.append(f"{name}.{sub}.weight" if name else f"{sub}.weight")
    return names


def weights_loaded(net: Any, loading_info: dict[str, Any], site_modules: list[Any],
                   model_type: str) -> WeightsLoaded:
    """Count the tensors loaded; refuse when an attention projection was not among them."""
    missing = tuple(sorted(str(k) for k in loading_info.get("missing_keys", ())))
    total = len(net.state_dict())
    projections = projection_weights(net, site_modules)
    lost = [n for n in projections if n in set(missing)]
    if lost:
        raise ConfigError("model", f"the weights hold no {lost[0]} ({len(lost)} of the "
                          f"{len(projections)} attention projection weights are missing, "
                          f"{total - len(missing)} of the model's {total} tensors found): "
                          f"they are not a {model_type} model's, and an audit of random "
                          "projections would measure nothing")
    return WeightsLoaded(total - len(missing), total, missing)
