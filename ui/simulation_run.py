"""One run of the simulation page as a single generator: the simulation, then the sweep along d_k
or along n (the number of keys).

It yields :class:`LabState` (plain data) so the worker's latest-slot coalescing never loses the
finished simulation when sweep points arrive. The d_k sweep does not depend on d_k (nor the n
sweep on n), so moving that control reuses the previous sweep (``SweepCache``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from engine.config import N_KEYS_SWEEP, SimulationConfig, SweepConfig
from engine.simulate import SimulationSnapshot, SweepPoint, simulate, sweep

SWEEP_D_KS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
#: trials per sweep point at most (the sweep is context; the main run carries the precision)
SWEEP_TRIALS_MAX = 4000
#: the n sweep's (trial, key) cells per point at most (fewer trials at large n; bands show it)
LENGTH_SWEEP_CELLS = 1 << 21
SWEEP_AXES = ("d_k", "n_keys")


@dataclass(frozen=True)
class LabState:
    config: SimulationConfig
    snapshot: SimulationSnapshot | None
    sweep: tuple[SweepPoint, ...]
    sweep_total: int
    phase: str  #: "simulation" | "sweep" | "done"
    sweep_axis: str = "d_k"  #: what the sweep runs along: "d_k" or "n_keys"

    @property
    def complete(self) -> bool:
        return self.phase == "done"

    @property
    def progress(self) -> float:
        """0..1 over both stages (the simulation counts as half)."""
        sim = self.snapshot.progress if self.snapshot is not None else 0.0
        sw = len(self.sweep) / self.sweep_total if self.sweep_total else 1.0
        return 0.5 * sim + 0.5 * sw


def sweep_config(cfg: SimulationConfig, axis: str = "d_k") -> SweepConfig:
    base = cfg.replace(trials=min(cfg.trials, SWEEP_TRIALS_MAX))
    if axis == "n_keys":
        return SweepConfig(base, SWEEP_D_KS, axis="n_keys", n_keys_values=N_KEYS_SWEEP,
                           cells_max=LENGTH_SWEEP_CELLS)
    return SweepConfig(base, SWEEP_D_KS)


class SweepCache:
    """The last finished sweep and the config it was run for (the swept parameter ignored)."""

    def __init__(self) -> None:
        # one tuple, swapped in one assignment (the worker thread writes, the next run reads)
        self._entry: tuple[tuple[str, SimulationConfig] | None, tuple[SweepPoint, ...]] = (None, ())

    @staticmethod
    def key_of(cfg: SimulationConfig, axis: str = "d_k") -> tuple[str, SimulationConfig]:
        return axis, sweep_config(cfg, axis).base.replace(**{axis: 2})

    def get(self, cfg: SimulationConfig, axis: str = "d_k") -> tuple[SweepPoint, ...] | None:
        key, points = self._entry
        return points if key == self.key_of(cfg, axis) and points else None

    def put(self, cfg: SimulationConfig, points: tuple[SweepPoint, ...], axis: str = "d_k") -> None:
        self._entry = (self.key_of(cfg, axis), points)


def lab_run(
    cfg: SimulationConfig,
    cancelled: Callable[[], bool],
    cache: SweepCache | None = None,
    with_sweep: bool = True,
    axis: str = "d_k",
) -> Iterator[LabState]:
    """Simulation snapshots, then sweep points along ``axis`` (d_k or n_keys), as cumulative
    states; the last is ``done``."""
    cached = cache.get(cfg, axis) if (cache is not None and with_sweep) else None
    sweep_cfg = sweep_config(cfg, axis)
    total = len(sweep_cfg.values) if with_sweep else 0
    shown_sweep: tuple[SweepPoint, ...] = cached if cached is not None else ()
    snap = None
    for snap in simulate(cfg, cancelled):
        finished = snap.done and (cached is not None or not with_sweep)
        yield LabState(cfg, snap, shown_sweep, total, "done" if finished else "simulation", axis)
    if cached is not None or not with_sweep:
        return
    points: list[SweepPoint] = []
    for point in sweep(sweep_cfg, cancelled):
        points.append(point)
        last = len(points) == total
        shown_sweep = tuple(points)
        if last and cache is not None:
            cache.put(cfg, shown_sweep, axis)
        yield LabState(cfg, snap, shown_sweep, total, "done" if last else "sweep", axis)
