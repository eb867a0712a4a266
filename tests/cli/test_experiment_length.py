"""A custom grid evaluated at other lengths gets the vs_length figure."""

from __future__ import annotations

import argparse

from ui.cli.experiment import add_arguments, build_spec


def _spec(*argv: str):
    p = argparse.ArgumentParser()
    add_arguments(p)
    return build_spec(p.parse_args(list(argv)))


def test_a_custom_grid_with_eval_lengths_draws_accuracy_vs_length():
    spec = _spec("--scaling", "sqrt", "logn", "--eval-lengths", "64", "256", "--axis", "seed=0,1")
    kinds = [f.kind for f in spec.figures]
    assert kinds.count("vs_length") == 1 and spec.base.eval_lengths == (64, 256)
    assert "vs_length" not in [f.kind for f in _spec("--axis", "seed=0,1").figures]


def test_the_builtin_length_experiment_keeps_its_own_figures():
    spec = _spec("length")
    assert [f.kind for f in spec.figures].count("vs_length") == 2
    assert spec.verdict.kind == "longest_length"


def test_the_builtin_recall_length_experiment_takes_cli_overrides():
    spec = _spec("recall_length", "--eval-every", "1", "--positions", "none")
    assert spec.base.task == "recall" and spec.base.positions == "none"
    assert spec.base.eval_every == 1 and spec.base.eval_lengths == (4, 16, 64)
    assert [f.kind for f in spec.figures].count("vs_length") == 2
