"""Drawing query-key similarities, chunk by chunk, on NumPy or torch (CPU/CUDA).

Two methods (docs/SCIENCE.md, "Exact shortcut for Gaussian keys"):

* ``explicit`` draws the vectors. Keys are processed in blocks so one block holds at most
  ``VECTOR_BUDGET`` numbers, whatever d_k and n_keys are: memory stays bounded.
* ``exact`` (Gaussian entries only): given q, the scores are independent normals, so only two
  summaries of q are needed, S1 = sum z and S2 = sum z^2 (z = standardized q), and by Cochran's
  theorem S2 = S1^2/d + chi2(d-1) with S1 ~ N(0, d) independent. Cost does not grow with d_k.

Key 0 of each row is the target key: its standardized entries are rho*z_q + sqrt(1-rho^2)*noise.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.config import SimulationConfig
from engine.device import cuda_available as cuda_available  # re-exported for older callers
from engine.device import resolve_device, torch_available
from engine.errors import Cancelled, ConfigError
from engine.rules import RULE_REGISTRY, RawScores

#: most numbers in one block of explicit key vectors (32 MiB in float64)
VECTOR_BUDGET = 1 << 22
#: most (trial, key) cells in one chunk of scores/weights (keeps row statistics bounded)
ROW_BUDGET = 1 << 18
LAYER_NORM_EPS = 1e-5
SQRT3 = math.sqrt(3.0)


def resolve_backend(cfg: SimulationConfig) -> tuple[str, str]:
    """(backend, device) actually used: auto = torch on CUDA when a GPU is visible, else NumPy;
    the device comes from :func:`engine.device.resolve_device`, as for training."""
    if cfg.backend == "numpy":
        return "numpy", "cpu"
    if cfg.backend == "auto":
        device = resolve_device(cfg.device)
        return ("torch", "cuda") if device == "cuda" else ("numpy", "cpu")
    # backend == torch
    if not torch_available():
        raise ConfigError("backend", "torch is not installed; use numpy or auto")
    return "torch", resolve_device(cfg.device)


def seed_sequence(cfg: SimulationConfig) -> np.random.SeedSequence:
    """One stream per (seed, d_k): a sweep point equals a single run at that d_k."""
    return np.random.SeedSequence([cfg.seed, cfg.d_k])


class _NumpyOps:
    def __init__(self, ss: np.random.SeedSequence, dtype: str) -> None:
        self.rng = np.random.default_rng(ss)
        self.dtype = np.dtype(dtype)

    def standardized(self, dist: str, shape: tuple[int, ...]) -> np.ndarray:
        if dist == "gaussian":
            return self.rng.standard_normal(shape, dtype=self.dtype)
        if dist == "uniform":
            u = self.rng.random(shape, dtype=self.dtype)
            u *= 2 * SQRT3
            u -= SQRT3
            return u
        return (self.rng.integers(0, 2, shape, dtype=np.int8) * 2 - 1).astype(self.dtype)

    def asarray(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(x, dtype=self.dtype)

    def sqrt(self, x):
        return np.sqrt(x)

    def var(self, x):
        return x.var(axis=-1)

    def to_numpy(self, x) -> np.ndarray:
        return x


class _TorchOps:
    def __init__(self, ss: np.random.SeedSequence, dtype: str, device: str) -> None:
        import torch

        self.torch = torch
        self.device = torch.device(device)
        self.dtype = getattr(torch, dtype)
        self.gen = torch.Generator(device=self.device)
        self.gen.manual_seed(int(ss.generate_state(1, dtype=np.uint64)[0] & ((1 << 63) - 1)))

    def standardized(self, dist: str, shape: tuple[int, ...]):
        t = self.torch
        kw = dict(generator=self.gen, device=self.device, dtype=self.dtype)
        if dist == "gaussian":
            return t.randn(shape, **kw)
        if dist == "uniform":
            return t.rand(shape, **kw).mul_(2 * SQRT3).sub_(SQRT3)
        return t.randint(0, 2, shape, generator=self.gen, device=self.device).to(self.dtype).mul_(2).sub_(1)

    def asarray(self, x: np.ndarray):
        return self.torch.as_tensor(np.asarray(x), dtype=self.dtype, device=self.device)

    def sqrt(self, x):
        return self.torch.sqrt(x)

    def var(self, x):
        return x.var(dim=-1, unbiased=False)

    def to_numpy(self, x) -> np.ndarray:
        return x.detach().cpu().numpy()


@dataclass(frozen=True)
class ChunkPlan:
    """How a run is cut: trials per chunk (growing geometrically to ``max_trials``) and the key
    block width for explicit vectors. Deterministic from the config, so runs are reproducible."""

    max_trials: int
    key_block: int
    first_trials: int

    def sizes(self, total: int):
        done, size = 0, self.first_trials
        while done < total:
            step = min(size, total - done)
            yield step
            done += step
            size = min(size * 2, self.max_trials)


def plan_chunks(cfg: SimulationConfig, method: str) -> ChunkPlan:
    n, d = cfg.n_keys, cfg.d_k
    rows = max(1, ROW_BUDGET // n)
    if method == "explicit":
        per_trial = n * d + d
        rows = max(1, min(rows, VECTOR_BUDGET // per_trial))
        key_block = n if n * d <= VECTOR_BUDGET else max(1, VECTOR_BUDGET // d)
    else:
        key_block = n
    first = max(1, min(rows, 256))
    return ChunkPlan(max_trials=rows, key_block=key_block, first_trials=first)


class ScoreSampler:
    """Draws ``RawScores`` chunk after chunk for one config; all rules see the same draws."""

    def __init__(self, cfg: SimulationConfig, backend: str, device: str, method: str) -> None:
        self.cfg = cfg
        self.method = method
        ss = seed_sequence(cfg)
        q_ss, k_ss = ss.spawn(2)
        # query summaries for the exact method always come from NumPy (chi-square is there)
        self.np_rng = np.random.default_rng(q_ss)
        self.ops: Any = _NumpyOps(k_ss, cfg.dtype) if backend == "numpy" else _TorchOps(k_ss, cfg.dtype, device)
        needs = {RULE_REGISTRY[r].needs for r in cfg.scalings}
        self.need_cos = "cos" in needs
        self.need_ln = "ln" in needs
        self.plan = plan_chunks(cfg, method)

    def draw(self, trials: int, cancelled: Callable[[], bool] | None = None) -> RawScores:
        if self.method == "exact":
            return self._draw_exact(trials)
        return self._draw_explicit(trials, cancelled)

    # -- exact ---------------------------------------------------------------------------------
    def _draw_exact(self, t: int) -> RawScores:
        c = self.cfg
        d, n, rho = c.d_k, c.n_keys, c.correlation
        s1 = self.np_rng.standard_normal(t) * math.sqrt(d)
        s2 = s1 * s1 / d + (self.np_rng.chisquare(d - 1, t) if d > 1 else 0.0)
        q_sum = d * c.q_mean + c.q_std * s1
        q_sq = d * c.q_mean**2 + 2 * c.q_mean * c.q_std * s1 + c.q_std**2 * s2
        q_z = c.q_mean * s1 + c.q_std * s2  # q . z_q
        q_norm = np.sqrt(np.maximum(q_sq, 0.0))
        ops = self.ops
        loc = ops.asarray((c.k_mean * q_sum)[:, None])
        scale = ops.asarray((c.k_std * q_norm)[:, None])
        noise = ops.standardized("gaussian", (t, n))
        dot = loc + scale * noise
        if rho != 0.0:
            shift = ops.asarray(c.k_std * rho * q_z)
            dot[:, 0] = loc[:, 0] + shift + math.sqrt(1 - rho * rho) * scale[:, 0] * noise[:, 0]
        return RawScores(dot=ops.to_numpy(dot))

    # -- explicit ------------------------------------------------------------------------------
    def _draw_explicit(self, t: int, cancelled: Callable[[], bool] | None) -> RawScores:
        c = self.cfg
        ops = self.ops
        d, n, rho = c.d_k, c.n_keys, c.correlation
        zq = ops.standardized(c.dist, (t, d))
        q = zq * c.q_std + c.q_mean
        qcol = q[:, :, None]
        if self.need_cos:
            q_norm = ops.sqrt((q * q).sum(-1))
        if self.need_ln:
            q_c = q - q.mean(-1)[:, None]
            ln_q = (q_c / ops.sqrt(ops.var(q) + LAYER_NORM_EPS)[:, None])[:, :, None]
        dots, coss, lns = [], [], []
        for j0 in range(0, n, self.plan.key_block):
            if cancelled is not None and cancelled():
                raise Cancelled
            j1 = min(n, j0 + self.plan.key_block)
            zk = ops.standardized(c.dist, (t, j1 - j0, d))
            if j0 == 0 and rho != 0.0:
                zk[:, 0, :] = rho * zq + math.sqrt(1 - rho * rho) * zk[:, 0, :]
            k = zk * c.k_std + c.k_mean
            dot = (k @ qcol)[:, :, 0]
            dots.append(ops.to_numpy(dot))
            if self.need_cos:
                k_norm = ops.sqrt((k * k).sum(-1))
                denom = k_norm * q_norm[:, None]
                cos = dot / (denom + (denom == 0))  # a zero vector has cosine 0 with anything
                coss.append(ops.to_numpy(cos))
            if self.need_ln:
                ln = (k @ ln_q)[:, :, 0] / ops.sqrt(ops.var(k) + LAYER_NORM_EPS)
                lns.append(ops.to_numpy(ln))

        def cat(parts: list[np.ndarray]) -> np.ndarray | None:
            if not parts:
                return None
            return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)

        return RawScores(dot=cat(dots), cos=cat(coss), ln=cat(lns))
