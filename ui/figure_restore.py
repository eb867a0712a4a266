"""File -> Open of an exported figure (PNG or SVG): it reopens into the page that drew it, with
everything that drew it, and the status bar says what was restored.

Every figure carries its metadata (``ui.plots.base.PlotPanel.figure_metadata``): the page, the
plot, what drew it (the simulation's or the training's parameters, an experiment and its folder,
a real model with its text) and the panel's view choices. The Simulation page's figures rerun at
once (same seed, same numbers); the other pages restore through their own ``restore_figure``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.config import SimulationConfig

#: page key in a figure's metadata -> the class of the page it reopens into
PAGE_CLASSES = {"training": "TrainingPage", "experiments": "ExperimentsPage",
                "real_model": "RealModelPage", "inspector": "InspectorPage"}
#: the longest scores text an inspector figure may carry (its page writes at most 200,000)
INSPECTOR_TEXT_MAX = 1_000_000
#: the Real model page's Port audit plot (ui.pages.real_model.port_panel.PortPanel.plot_id): its
#: figure carries the port file, the source folder and the text instead of a probe's parameters
PORT_PLOT = "port_audit"
STATUS_MS = 15_000


def page_figure(path: str | Path) -> dict[str, Any] | None:
    """The metadata of the figure at ``path`` when it names the page that drew it; None for a
    figure that does not (a session in a figure: ``ui.session_file`` reads it). FileFormatError
    for a figure that is too large or whose metadata is not bounded JSON."""
    from ui.plots.figure_metadata import read_figure_metadata

    meta = read_figure_metadata(path)
    if meta is None:
        return None
    page = meta.get("page")
    return meta if isinstance(page, str) and (page == "simulation" or page in PAGE_CLASSES) else None


def checked(window: Any, meta: dict[str, Any], source: str) -> dict[str, Any]:
    """``meta`` with every part that reaches a page validated (FileFormatError naming the file
    and the field otherwise): the session parts as File -> Open checks a session, an experiment
    as an experiment.json is checked."""
    from engine.readers.schema import Boolean, Nullable, Record, Text, errors_in_file
    from ui.session_file import check_session

    if meta["page"] == "inspector":  # typed text: the page parses it before anything changes
        short = Text(max_chars=1000)
        with errors_in_file(source, "inspector"):
            Record({"scores": Text(max_chars=INSPECTOR_TEXT_MAX), "scale": short,
                    "softcap": short, "sink": short, "sigmoid": Boolean()},
                   required=frozenset({"scores", "scale"})).check(meta.get("inspector"))
        return meta
    if meta["page"] == "real_model" and meta.get("plot") == PORT_PLOT:
        from ui.session_file import MAX_PROBE_TEXT_CHARS

        path = Text(max_chars=4096)
        with errors_in_file(source, "port"):
            Record({"path": path, "source": Nullable(path),
                    "text": Nullable(Text(max_chars=MAX_PROBE_TEXT_CHARS))},
                   required=frozenset({"path"})).check(meta.get("port"))
        return meta
    if meta["page"] != "experiments":
        return check_session(meta, source, window.params.widget_values)
    from engine.experiments.spec import ExperimentSpec

    with errors_in_file(source):
        Record({"folder": Nullable(Text(max_chars=4096))}, extra="keep").check(meta)
    with errors_in_file(source, "experiment"):
        ExperimentSpec.from_dict(meta.get("experiment"))
    return meta


def open_figure(window: Any, path: str | Path, meta: dict[str, Any]) -> SimulationConfig | None:
    """Reopen the figure at ``path`` (its metadata ``meta``, see :func:`page_figure`) into its
    page; returns the Simulation parameters for a Simulation figure (None for another page's).
    FileFormatError or ValueError names what is wrong; nothing changes then."""
    path = Path(path)
    meta = checked(window, meta, str(path))
    page = meta["page"]
    cfg = None
    if page == "simulation":
        text, cfg = _simulation(window, meta)
    else:
        target = window.ensure_page(PAGE_CLASSES[page])
        if target is None or not hasattr(target, "restore_figure"):
            raise ValueError(f"the {page.replace('_', ' ')} page is not available")
        text = target.restore_figure(meta, path.name)
        window.open_page(PAGE_CLASSES[page])
    window.last_message = f"Opened {path.name}: {text}"
    window.statusBar().showMessage(window.last_message, STATUS_MS)
    return cfg


def _simulation(window: Any, meta: dict[str, Any]) -> tuple[str, SimulationConfig]:
    """Parameters, sweep axis and the panel's view choices, then a rerun; the plot outlined."""
    data = meta.get("config")
    if not isinstance(data, dict):
        raise ValueError('"config" is not a JSON object')
    cfg = SimulationConfig.from_dict(data)
    view = meta.get("view") if isinstance(meta.get("view"), dict) else {}
    plot = str(meta.get("plot", ""))
    panel_id = "sweep" if plot.startswith("sweep") else plot
    panel = window.page.panels.get(panel_id)
    window.params.set_config(cfg)
    axis = view.get("sweep_axis", meta.get("sweep_axis"))
    if axis in ("d_k", "n_keys"):
        window.set_sweep_axis(axis, rerun=False)
    done = panel.apply_view_state(view) if panel is not None else []
    window.rerun()
    if panel is not None:
        window.highlight_plot(panel_id)
    if axis == "n_keys" and panel_id == "sweep":
        done.append("sweep along n")
    title = panel.title.lower() if panel is not None else plot
    text = (f"the {title} figure: d_k {cfg.d_k:,}, n {cfg.n_keys:,}, {', '.join(cfg.scalings)}, "
            f"{cfg.trials:,} trials, seed {cfg.seed}" + (f"; {', '.join(done)}" if done else ""))
    return text, cfg
