"""Cost of refusing hostile files, per reader: the fuzz corpus of tests/fuzz run once, outside
pytest, with each read's wall time and the rise of the process's peak resident memory (Linux:
VmHWM after a reset; 0 elsewhere), as ratios to reading the reader's valid document.

Prints the number of cases (hostile files x readers, things that are not files x readers,
hostile images, SVG element bombs, and fields x hostile values) and, per reader, the slowest case and the largest
memory rise. The tests bound each read at 20 s and 256 MB (a hang and blow-up detector): this
prints how far below that the readers stay.

    .venv/bin/python bench/bench_readers.py [--values] (also the field x value mutations)
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--values", action="store_true", help="also the field x value mutations")
    args = parser.parse_args()
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication([])  # noqa: F841 (PNG text chunks)
    from tests.fuzz.corpus import (
        HOSTILE_CONTENT,
        HOSTILE_PLACES,
        HOSTILE_VALUES,
        paths,
        replaced,
        spread,
    )
    from tests.fuzz.readers import readers
    from tests.fuzz.test_corpus import measured

    rows, total = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, reader in readers().items():
            cases = _cases(reader, args.values, HOSTILE_CONTENT, HOSTILE_PLACES, HOSTILE_VALUES,
                           paths, replaced, spread)
            valid = reader.valid() if reader.valid else b"{}"
            _time(reader, Path(tmp), "warm", lambda t, r=reader, v=valid: r.write(t, v), measured)
            base = _time(reader, Path(tmp), "valid", lambda t, r=reader, v=valid: r.write(t, v),
                         measured)[0]
            worst_t, worst_m = ("", 0.0), ("", 0)
            for i, (label, fill) in enumerate(cases):
                seconds, peak = _time(reader, Path(tmp), f"{name}{i}", fill, measured)
                worst_t = max(worst_t, (label, seconds), key=lambda x: x[1])
                worst_m = max(worst_m, (label, peak), key=lambda x: x[1])
            total += len(cases)
            rows.append((name, len(cases), base, worst_t, worst_m))
    print(f"{'reader':20s} {'cases':>6s} {'valid s':>8s} {'slowest case (s, x valid)':>44s} "
          f"{'largest memory rise':>36s}")
    for name, n, base, (tl, ts), (ml, mp) in rows:
        print(f"{name:20s} {n:6d} {base:8.4f} {tl[:24]:>24s} {ts:7.3f} {ts / max(base, 1e-6):8.0f}x"
              f" {ml[:24]:>24s} {mp / 2**20:8.1f} MB")
    print(f"{total} cases in all")
    return 0


def _cases(reader, values: bool, content, places, hostile_values, paths, replaced, spread):
    """(label, writer of the case at a path) of every case of ``reader``."""
    cases = [(f"content {c}", lambda t, c=c: reader.write(t, content[c]())) for c in content]
    if reader.files:
        cases += [(f"place {c}", places[c]) for c in places]
    if reader.suffix in (".png", ".svg"):
        cases += [(f"image {c}", lambda t, c=c: t.write_bytes(content[c]())) for c in content]
    if reader.suffix == ".svg":
        from tests.fuzz.corpus import HOSTILE_SVG

        cases += [(f"svg {c}", lambda t, c=c: t.write_bytes(HOSTILE_SVG[c]())) for c in HOSTILE_SVG]
    valid = reader.valid() if reader.valid else None
    if values and valid is not None:
        for p in spread(list(paths(valid))):
            for v in hostile_values:
                doc = replaced(valid, p, hostile_values[v])
                cases.append((f"{'.'.join(map(str, p))}={v}",
                              lambda t, doc=doc: reader.write(t, doc)))
    return cases


def _time(reader, tmp: Path, label: str, fill, measured) -> tuple[float, int]:
    """(seconds, memory rise) of reading the case ``fill`` writes."""
    where = tmp / label / f"case{reader.suffix}"
    where.parent.mkdir(parents=True, exist_ok=True)
    fill(reader.prepare(where))
    _result, _error, seconds, peak = measured(lambda: reader.read(where))
    return seconds, peak


if __name__ == "__main__":
    sys.exit(main())
