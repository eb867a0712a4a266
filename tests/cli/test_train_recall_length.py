"""``train`` evaluating the recall task at more pairs: --positions, --eval-lengths in pairs,
--eval-every, and the one-line errors."""

from __future__ import annotations

import pytest

from engine.io import read_csv
from main import main

RECALL = ["train", "--task", "recall", "--d-model", "16", "--heads", "2", "--layers", "2",
          "--classes", "32", "--pairs", "2", "--scaling", "sqrt", "logn", "--steps", "4",
          "--log-every", "1", "--batch", "8", "--probe-size", "4", "--hist-bins", "20",
          "--eval-size", "8", "--device", "cpu", "--quiet"]


def test_recall_at_more_pairs_writes_the_length_columns_every_k_logs(tmp_path, capsys):
    pytest.importorskip("torch")
    argv = [*RECALL, "--positions", "sinusoidal", "--eval-lengths", "8", "32",
            "--eval-every", "3", "--out", str(tmp_path)]
    assert main(argv) == 0
    assert "acc@32" in capsys.readouterr().out
    rows = read_csv(tmp_path / "metrics.csv")
    assert list(rows[0])[-4:] == ["accuracy_len8", "entropy_norm_len8", "accuracy_len32",
                                  "entropy_norm_len32"]
    for row in rows:  # logs 0..4: evaluated at 0, 3 and 4 (the last)
        evaluated = row["step"] in ("0", "3", "4")
        assert (row["accuracy_len32"] != "") == evaluated
        if evaluated:
            assert 0.0 <= float(row["accuracy_len32"]) <= 1.0
            assert 0.0 < float(row["entropy_norm_len32"]) <= 1.0 + 1e-9


@pytest.mark.parametrize("args,option,words", [
    (["--eval-lengths", "8"], "--positions", "sinusoidal or none"),  # learned: trained length only
    (["--positions", "rope"], "--positions", "learned"),
    (["--positions", "none", "--eval-lengths", "64"], "--eval-lengths", "classes"),
    (["--eval-every", "0"], "--eval-every", "from 1"),
])
def test_bad_recall_length_input_exits_2_with_one_line(args, option, words, capsys):
    with pytest.raises(SystemExit) as exc:
        main([*RECALL, *args])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and option in err and words in err and "Traceback" not in err


def test_help_documents_positions_and_pairs():
    import argparse

    from ui.cli.train import add_arguments

    p = argparse.ArgumentParser()
    add_arguments(p)
    text = p.format_help()
    assert "--positions" in text and "--eval-every" in text and "recall pairs" in text
