"""A figure's parameters travel inside its SVG and come back out; a file that is not ours says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.errors import FileFormatError
from ui.plots.figure_metadata import METADATA_KEY, read_figure_metadata, svg_with_metadata

SVG = b'<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"><rect/></svg>'


def test_svg_metadata_round_trips(tmp_path: Path) -> None:
    meta = {"page": "simulation", "plot": "scores", "text": "a < b & \"c\""}
    data = svg_with_metadata(SVG, meta)
    assert f'<metadata id="{METADATA_KEY}">'.encode() in data
    assert data.index(b"<metadata") < data.index(b"<rect")  # right after the root: read first
    path = tmp_path / "figure.svg"
    path.write_bytes(data)
    assert read_figure_metadata(path) == meta


def test_an_svg_without_our_metadata_and_other_files_are_not_figures(tmp_path: Path) -> None:
    (tmp_path / "plain.svg").write_bytes(SVG)
    (tmp_path / "data.csv").write_text("a,b\n1,2\n")
    assert read_figure_metadata(tmp_path / "plain.svg") is None
    assert read_figure_metadata(tmp_path / "data.csv") is None
    assert svg_with_metadata(b"not an svg", {"a": 1}) == b"not an svg"


def test_a_broken_svg_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.svg"
    path.write_bytes(b"<svg><g>")
    with pytest.raises(FileFormatError, match=r"broken\.svg"):
        read_figure_metadata(path)
