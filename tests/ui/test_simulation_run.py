"""The simulation page's run generator and presets (plain data, no window)."""

from __future__ import annotations

from engine.config import SimulationConfig
from engine.simulate import run_simulation
from engine.simulation_presets import load_presets
from ui.simulation_run import SWEEP_D_KS, SweepCache, lab_run


def _never() -> bool:
    return False


def test_lab_run_streams_simulation_then_sweep():
    cfg = SimulationConfig(trials=1500)
    states = list(lab_run(cfg, _never, SweepCache()))
    phases = [s.phase for s in states]
    assert phases[-1] == "done" and phases.count("done") == 1
    assert phases.index("sweep") > phases.index("simulation")
    progress = [s.progress for s in states]
    assert progress == sorted(progress) and progress[-1] == 1.0
    last = states[-1]
    assert [p.d_k for p in last.sweep] == list(SWEEP_D_KS)
    assert last.snapshot.done
    ref = run_simulation(cfg)
    assert last.snapshot.raw_var == ref.raw_var  # same numbers as a headless run


def test_moving_d_k_reuses_the_sweep():
    cache = SweepCache()
    first = list(lab_run(SimulationConfig(trials=500), _never, cache))[-1]
    states = list(lab_run(SimulationConfig(trials=500, d_k=300), _never, cache))
    assert all(s.sweep is first.sweep for s in states)  # no recomputation
    assert states[-1].complete and states[-1].snapshot.config.d_k == 300
    # any other parameter invalidates it
    other = list(lab_run(SimulationConfig(trials=500, n_keys=4), _never, cache))[-1]
    assert other.sweep is not first.sweep and other.sweep[0].snapshot.config.n_keys == 4


def test_presets_are_valid_configs():
    presets = load_presets()
    assert len(presets) >= 4
    for p in presets:
        assert p.title and p.description
        SimulationConfig().replace(**{k: tuple(v) if isinstance(v, list) else v
                                      for k, v in p.config.items()})
