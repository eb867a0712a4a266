"""The one walk that installs an adapter's sites, and how a wrapped ``_attn`` call plants the tap's
factors: on plain Python stand-ins (no torch), every count, mark and factor written by hand."""

from __future__ import annotations

from engine.probe.install import call_modified, install_sites, wrap_attn
from engine.probe.tap import Modifier


class SelfAttention:
    pass


class CrossAttention:
    pass


class MLP:
    pass


class Model:
    def __init__(self, mods: list) -> None:
        self.mods = mods

    def modules(self):
        return iter(self.mods)


class FakeTap:
    """Records marks; hands out one site per call and the modifiers it was given."""

    def __init__(self, modifiers: dict[int, Modifier] | None = None) -> None:
        self.marks: list[tuple[object, str]] = []
        self.asked: list[object] = []
        self.modifiers = modifiers or {}

    def mark_adapter(self, module, name: str) -> None:
        self.marks.append((module, name))

    def site_of(self, module) -> int:
        self.asked.append(module)
        return len(self.asked) - 1

    def modifier(self, site: int) -> Modifier:
        return self.modifiers.get(site, Modifier())


def test_only_the_named_classes_are_installed_in_model_order_and_marked() -> None:
    a1, m, a2, c = SelfAttention(), MLP(), SelfAttention(), CrossAttention()
    tap, made = FakeTap(), []
    assert install_sites(tap, Model([a1, m, a2, c]), "SelfAttention", made.append, "bert") == 2
    assert made == [a1, a2] and tap.marks == [(a1, "bert"), (a2, "bert")]


def test_a_collection_of_names_is_not_taken_letter_by_letter() -> None:
    a, c, m = SelfAttention(), CrossAttention(), MLP()
    tap, made = FakeTap(), []
    assert install_sites(tap, Model([m, c, a]), ("SelfAttention", "CrossAttention"),
                         made.append, "x") == 2
    assert made == [c, a]
    # a single name is one name, not the set of its substrings ("Attention" is no class here)
    assert install_sites(FakeTap(), Model([a, c]), "SelfAttentionCrossAttention", made.append,
                         "x") == 0


def test_accept_filters_and_no_name_marks_nothing() -> None:
    keep, drop = SelfAttention(), SelfAttention()
    keep.ok, drop.ok = True, False
    tap, made = FakeTap(), []
    n = install_sites(tap, Model([drop, keep]), "SelfAttention", made.append, None,
                      accept=lambda mod: mod.ok)
    assert (n, made, tap.marks) == (1, [keep], [])
    assert install_sites(FakeTap(), Model([MLP()]), "SelfAttention", made.append, "y") == 0


def test_wrap_attn_shadows_the_method_with_the_wrapper_of_the_original() -> None:
    class Attn:
        def _attn(self, q):
            return ("plain", q)

    mod, seen = Attn(), []

    def wrap(module, original):
        seen.append((module, original))
        return lambda q: ("wrapped", original(q))

    def original_call(q):
        return q

    mod._attn = original_call
    assert wrap_attn(wrap)(mod) is None
    assert seen == [(mod, original_call)] and mod._attn(3) == ("wrapped", 3)
    other = Attn()
    wrap_attn(lambda module, original: lambda q: ("w", original(q), module is other))(other)
    assert other._attn(5) == ("w", ("plain", 5), True)


def _original(calls: list):
    def original(q, *rest):
        calls.append((q, rest))
        return 10.0 * q, 2.0 * q  # (output, weights)
    return original


def test_call_modified_passes_the_query_and_everything_else_unchanged_without_factors() -> None:
    tap, calls = FakeTap(), []
    mod = object()
    site, out, weights = call_modified(tap, mod, _original(calls), 3.0, "k", "v", None)
    assert (site, out, weights) == (0, 30.0, 6.0)
    assert calls == [(3.0, ("k", "v", None))] and tap.asked == [mod]


def test_a_query_factor_goes_into_the_query_and_a_weight_factor_onto_both_outputs() -> None:
    tap, calls = FakeTap({0: Modifier(q_factor=0.5), 1: Modifier(w_factor=0.25),
                          2: Modifier(q_factor=3.0, w_factor=-2.0)}), []
    orig = _original(calls)
    assert call_modified(tap, "m", orig, 4.0, "k") == (0, 20.0, 4.0)  # q 4 * 0.5 = 2
    assert call_modified(tap, "m", orig, 4.0, "k") == (1, 10.0, 2.0)  # 40 * 0.25, 8 * 0.25
    assert call_modified(tap, "m", orig, 1.0, "k") == (2, -60.0, -12.0)
    assert [q for q, _ in calls] == [2.0, 4.0, 3.0]


def test_a_factor_of_one_leaves_the_objects_untouched() -> None:
    """An identity factor must not even multiply (a tensor times 1.0 is a copy, an int a float)."""
    class NoMul:
        def __mul__(self, other):
            raise AssertionError("multiplied")

    q, o, w = NoMul(), NoMul(), NoMul()
    site, out, weights = call_modified(FakeTap(), "m", lambda qq, *r: (o, w) if qq is q else None,
                                       q, "k")
    assert site == 0 and out is o and weights is w
