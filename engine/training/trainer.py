"""Paired training runs: one model per scaling rule, same initial weights, same batches.

:class:`Trainer` holds the state; ``advance()`` does one iteration for every live run (the
single-step of the GUI), ``iterate()`` is the generator that runs to the end and yields a
:class:`TrainingSnapshot` at every log step (pause = stop iterating and call ``iterate()`` again
later; stop = ``cancelled()`` true; reset = ``reset()`` re-creates the same initial weights).

Iteration s (0..steps) runs a forward/backward pass on batch s with the weights after s updates;
at a log step (0, log_every, ..., steps) it records the observations, then (if s < steps) updates.
So the log at step s describes the model after s updates, and its loss/accuracy are the means over
the training batches since the previous log. A run whose loss is NaN/Inf is marked diverged and
stops; the others go on.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

from engine.device import resolve_device as _resolve_device
from engine.rules import RULE_REGISTRY
from engine.training.config import TrainingConfig
from engine.training.gradients import CHAIN, GAIN, GradTaps
from engine.training.lengths import evaluate_lengths, length_columns
from engine.training.model import RULE_PARAMETERS, AttentionCapture, AttentionModel
from engine.training.numerics import training_numerics
from engine.training.observe import (  # noqa: F401 (the column names are re-exported)
    CSV_COLUMNS,
    HEAD_CSV_COLUMNS,
    HEAD_METRICS,
    PERCENTILES,
    SCALARS,
    head_stats,
    logit_edges,
)
from engine.training.parametrization import attach_multipliers, mup_init_, optimizer_params
from engine.training.qk_clip import clip_heads
from engine.training.tasks import input_features, make_batch, stream_seed, vocab_size


def resolve_device(cfg: TrainingConfig) -> str:
    """auto = CUDA when torch sees a device, else CPU (the same resolution as the simulation)."""
    return _resolve_device(cfg.device)


@dataclass(frozen=True)
class TrainingSnapshot:
    """Plain data (NumPy arrays and numbers) for plots, CSV export and tests. Arrays are indexed
    [log, run, layer, head, ...]; entries where ``valid`` is False (after a divergence) are 0."""

    config: TrainingConfig
    rules: tuple[str, ...]
    step: int  #: updates done
    done: bool
    elapsed_s: float
    steps_per_s: float
    device: str
    log_steps: np.ndarray  #: (n,) int
    valid: np.ndarray  #: (n, R) bool
    scalars: dict[str, np.ndarray]  #: name -> (n, R)
    heads: dict[str, np.ndarray]  #: name -> (n, R, L, H)
    hist_edges: np.ndarray  #: (bins + 1,) fixed, asinh-spaced (observe.logit_edges)
    logit_hist: np.ndarray  #: (n, R, L, H, bins) counts
    logit_outside: np.ndarray  #: (n, R, L, H, 2) counts below / above the edges
    logit_percentiles: np.ndarray  #: (n, R, L, H, len(PERCENTILES))
    probe_weights: np.ndarray  #: (R, L, H, m, m) latest weights of probe example 0
    has_temperature: np.ndarray  #: (R,) bool: the rule learns a temperature
    diverged_step: np.ndarray  #: (R,) int, -1 while the run is healthy
    collapse_step: np.ndarray  #: (R, L, H) int: start of a collapse that has lasted, else -1
    percentiles: tuple[float, ...] = PERCENTILES
    #: (n,) bool: the evaluation lengths were measured at this log (``eval_every``); the
    #: ``*_len{N}`` scalars are 0 where not. None = at every log
    length_evaluated: np.ndarray | None = None
    #: (R, updates) int: heads qkclip clipped after each update (0 for the other rules)
    clipped_per_step: np.ndarray | None = None

    def length_logs(self, r: int) -> np.ndarray:
        """Indices of the logs of run ``r`` that hold an evaluation at the lengths."""
        ok = self.valid[:, r]
        if self.length_evaluated is not None:
            ok = ok & self.length_evaluated
        return np.flatnonzero(ok)

    @property
    def csv_columns(self) -> tuple[str, ...]:
        """metrics.csv's columns: CSV_COLUMNS, then accuracy/entropy at each evaluation length."""
        return CSV_COLUMNS + length_columns(self.config)

    @property
    def n_logs(self) -> int:
        return int(self.log_steps.shape[0])

    @property
    def progress(self) -> float:
        return min(self.step / self.config.steps, 1.0)

    def run_index(self, rule: str) -> int:
        return self.rules.index(rule)

    def final(self, name: str, rule: str) -> float:
        """Last valid value of a scalar metric (or a per-head mean) for ``rule``."""
        r = self.run_index(rule)
        idx = np.flatnonzero(self.valid[:, r])
        if idx.size == 0:
            return float("nan")
        i = idx[-1]
        if name in self.scalars:
            return float(self.scalars[name][i, r])
        return float(self.heads[name][i, r].mean())

    def metrics_rows(self) -> list[dict[str, object]]:
        """One row per (rule, log step) with the columns of ``metrics.csv``."""
        rows = []
        for r, rule in enumerate(self.rules):
            for i in np.flatnonzero(self.valid[:, r]):
                row: dict[str, object] = {"scaling": rule, "step": int(self.log_steps[i])}
                for name in SCALARS:
                    row[name] = float(self.scalars[name][i, r])
                evaluated = self.length_evaluated is None or bool(self.length_evaluated[i])
                for name in length_columns(self.config):  # empty between evaluations
                    row[name] = float(self.scalars[name][i, r]) if evaluated else ""
                h = {k: float(v[i, r].mean()) for k, v in self.heads.items()}
                row.update(entropy_norm_mean=h["entropy_norm"], logit_std=h["logit_std"],
                           logit_mean=h["logit_mean"], top_weight_mean=h["top_weight"],
                           saturated_frac=h["saturated_frac"], jacobian_fro_mean=h["jacobian_fro"],
                           grad_norm_q=h["grad_norm_q"], grad_norm_k=h["grad_norm_k"],
                           grad_norm_v=h["grad_norm_v"], grad_norm_o=h["grad_norm_o"],
                           temperature=h["temperature"] if self.has_temperature[r] else "",
                           ssmax_s=h["ssmax_s"] if rule == "ssmax" else "",
                           logit_max_abs=float(self.heads["logit_max_abs"][i, r].max()),
                           key_mass_mean=h["key_mass"], sink_weight_mean=h["sink_weight"],
                           sink_logit=h["sink_logit"] if _learns_sink(rule) else "",
                           clipped_heads=self._clipped_heads(i, r) if _clips(rule) else "",
                           **{k: h[k] for k in (*CHAIN, GAIN)})
                rows.append(row)
        return rows

    def _clipped_heads(self, i: int, r: int) -> float:
        """Mean number of heads qkclip clipped per update between the previous log and log i."""
        updates = int(self.log_steps[i]) - (int(self.log_steps[i - 1]) if i > 0 else 0)
        return float(self.heads["clip_count"][i, r].sum()) / updates if updates > 0 else 0.0

    def head_rows(self) -> list[dict[str, object]]:
        """One row per (rule, log step, layer, head): ``metrics_heads.csv``."""
        rows = []
        for r, rule in enumerate(self.rules):
            for i in np.flatnonzero(self.valid[:, r]):
                rows.extend(self._head_rows_at(r, rule, int(i)))
        return rows

    def _head_rows_at(self, r: int, rule: str, i: int) -> list[dict[str, object]]:
        """The rows of every (layer, head) of run ``r`` at log ``i``; a column the rule has no
        meaning for (a learned temperature, ssmax's s) is left empty."""
        rows = []
        _, _, n_layers, n_heads = self.heads["entropy_norm"].shape
        for layer in range(n_layers):
            for head in range(n_heads):
                row: dict[str, object] = {"scaling": rule, "step": int(self.log_steps[i]),
                                          "layer": layer, "head": head}
                for name in HEAD_METRICS:
                    row[name] = float(self.heads[name][i, r, layer, head])
                if not self.has_temperature[r]:
                    row["temperature"] = ""
                if rule != "ssmax":
                    row["ssmax_s"] = ""
                if not _learns_sink(rule):
                    row["sink_logit"] = ""
                if not _clips(rule):
                    row["clip_count"] = ""
                rows.append(row)
        return rows

    def histogram_arrays(self) -> dict[str, np.ndarray]:
        """Everything per head, for ``histograms.npz`` (arrays indexed [log, run, layer, head])."""
        out = {"rules": np.array(self.rules), "log_steps": self.log_steps, "valid": self.valid,
               "logit_edges": self.hist_edges, "logit_counts": self.logit_hist,
               "logit_outside": self.logit_outside, "logit_percentiles": self.logit_percentiles,
               "percentiles": np.array(self.percentiles), "probe_weights": self.probe_weights,
               "diverged_step": self.diverged_step, "collapse_step": self.collapse_step}
        if self.length_evaluated is not None:
            out["length_evaluated"] = self.length_evaluated
        if self.clipped_per_step is not None:
            out["clipped_heads_per_step"] = self.clipped_per_step
        for name, arr in self.scalars.items():
            out[name] = arr
        for name, arr in self.heads.items():
            out[f"head_{name}"] = arr
        return out


def _learns_sink(rule: str) -> bool:
    return RULE_REGISTRY[rule].weights == "sink"


def _clips(rule: str) -> bool:
    return RULE_REGISTRY[rule].qk_clip


class _Growable:
    """Rows appended one log at a time; snapshots take views of the filled part (rows already
    written never change, and a reallocation leaves old views intact)."""

    def __init__(self, shape: tuple[int, ...], dtype: Any, capacity: int) -> None:
        self.data = np.zeros((max(capacity, 1), *shape), dtype=dtype)
        self.n = 0

    def append(self, row: np.ndarray) -> None:
        if self.n == self.data.shape[0]:
            bigger = np.zeros((2 * self.n, *self.data.shape[1:]), dtype=self.data.dtype)
            bigger[: self.n] = self.data[: self.n]
            self.data = bigger
        self.data[self.n] = row
        self.n += 1

    def view(self) -> np.ndarray:
        return self.data[: self.n]


class _LogRecord:
    """One log's rows for every run, zero until the run is observed (and again if it diverges)."""

    def __init__(self, cfg: TrainingConfig, runs: int) -> None:
        layers, heads = cfg.layers, cfg.heads
        self.valid = np.zeros(runs, dtype=bool)
        self.scalars = {k: np.zeros(runs) for k in (*SCALARS, *length_columns(cfg))}
        self.heads = {k: np.zeros((runs, layers, heads)) for k in HEAD_METRICS}
        self.hist = np.zeros((runs, layers, heads, cfg.hist_bins), dtype=np.int32)
        self.outside = np.zeros((runs, layers, heads, 2), dtype=np.int64)
        self.pct = np.zeros((runs, layers, heads, len(PERCENTILES)))

    def finite(self, i: int) -> bool:
        """Run i's per-head values and percentiles hold no NaN/Inf."""
        return all(np.isfinite(v[i]).all() for v in (*self.heads.values(), self.pct))

    def blank(self, i: int) -> None:
        """Run i is not valid at this log: its entries are 0."""
        self.valid[i] = False
        for v in (*self.scalars.values(), *self.heads.values(), self.hist, self.outside, self.pct):
            v[i] = 0


class _Run:
    """One rule's model, optimizer and health."""

    def __init__(self, rule: str, model: AttentionModel, cfg: TrainingConfig) -> None:
        self.rule = rule
        self.model = model
        params = optimizer_params(model, cfg)  # sp: the model's; mup: groups with an lr_scale
        # foreach: one kernel call per group instead of one per tensor (CPU's default is the
        # loop): the same arithmetic, bit for bit, and a tiny model's update several times cheaper
        if cfg.optimizer == "adam" and cfg.weight_decay > 0:
            self.opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay,
                                         foreach=True)
        elif cfg.optimizer == "adam":  # plain Adam, so runs without decay keep their numbers
            self.opt = torch.optim.Adam(params, lr=cfg.lr, foreach=True)
        else:
            self.opt = torch.optim.SGD(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
        self.diverged_step = -1
        self.loss_sum = 0.0
        self.acc_sum = 0.0
        self.count = 0
        self.clips = RULE_REGISTRY[rule].qk_clip  #: qkclip: W_Q, W_K clipped after each step
        #: heads clipped per (layer, head) since the last log, and per update over the run
        self.clip_since_log = np.zeros((cfg.layers, cfg.heads), dtype=np.int64)
        self.clipped_per_step: list[int] = []

    @property
    def alive(self) -> bool:
        return self.diverged_step < 0


class Trainer:
    """Several rules trained side by side (paired: same init, same batches)."""

    def __init__(self, cfg: TrainingConfig, observe: bool = True,
                 flush_denormal: bool = True) -> None:
        self.cfg = cfg
        self.observe = observe
        #: False only to measure what flushing subnormals changes (tests, bench)
        self.flush_denormal = flush_denormal
        self.device = resolve_device(cfg)
        self.reset()

    # -- state ---------------------------------------------------------------------------------
    def reset(self) -> None:
        """Back to step 0 with the same initial weights, batches and probe (same seed)."""
        cfg = self.cfg
        base = None
        self.runs: list[_Run] = []
        for rule in cfg.scalings:
            model = AttentionModel(cfg, rule, input_features(cfg), vocab_size(cfg))
            if base is None:
                model.init_weights(torch.Generator().manual_seed(stream_seed(cfg.seed, 0)))
                mup_init_(model, cfg)  # muP's zero and rescaled inits (nothing under sp)
                base = model.state_dict()
            else:
                own = model.state_dict()
                own.update({k: v for k, v in base.items() if k in own and not any(p in k for p in RULE_PARAMETERS)})
                model.load_state_dict(own)
            attach_multipliers(model, cfg)  # muP's forward multipliers (nothing under sp)
            self.runs.append(_Run(rule, model.to(self.device), cfg))
        self.data_gen = torch.Generator().manual_seed(stream_seed(cfg.seed, 1))
        self.probe = make_batch(cfg, cfg.probe_size, torch.Generator().manual_seed(
            stream_seed(cfg.seed, 2))).to(self.device)
        self.next_iter = 0  # iteration to run next (0..steps)
        self.log_every = cfg.log_every
        r, layers, heads = len(self.runs), cfg.layers, cfg.heads
        cap = len(cfg.log_steps) + 4
        self._steps = _Growable((), np.int64, cap)
        self._valid = _Growable((r,), bool, cap)
        self._evaluated = _Growable((), bool, cap)
        self._scalars = {k: _Growable((r,), np.float64, cap) for k in (*SCALARS, *length_columns(cfg))}
        self._heads = {k: _Growable((r, layers, heads), np.float64, cap) for k in HEAD_METRICS}
        self.edges = logit_edges(cfg.hist_range, cfg.hist_bins)
        self._hist = _Growable((r, layers, heads, cfg.hist_bins), np.int32, cap)
        self._outside = _Growable((r, layers, heads, 2), np.int64, cap)
        self._pct = _Growable((r, layers, heads, len(PERCENTILES)), np.float64, cap)
        n0 = int(self.probe.lengths[0])
        self._probe_w = np.zeros((r, layers, heads, n0, n0))
        self._below = np.zeros((r, layers, heads), dtype=np.int64)
        self._below_since = np.full((r, layers, heads), -1, dtype=np.int64)
        self.elapsed = 0.0
        self._iters_timed = 0

    @property
    def step(self) -> int:
        """Updates done so far."""
        return min(self.next_iter, self.cfg.steps)

    @property
    def done(self) -> bool:
        return self.next_iter > self.cfg.steps or not any(run.alive for run in self.runs)

    def is_log_step(self, s: int) -> bool:
        return s % self.log_every == 0 or s == self.cfg.steps

    # -- one iteration -------------------------------------------------------------------------
    def advance(self, force_log: bool = False) -> bool:
        """Run one iteration for every live run; True when it recorded a log. The step runs under
        the one numerics policy (``numerics.training_numerics``: single thread, subnormals
        flushed), so ``train``, the Training page and experiment jobs give the same numbers."""
        if self.done:
            return False
        with training_numerics(self.flush_denormal):
            return self._advance(force_log)

    def _advance(self, force_log: bool) -> bool:
        start = time.perf_counter()
        s = self.next_iter
        cfg = self.cfg
        batch = make_batch(cfg, cfg.batch, self.data_gen).to(self.device)
        log = self.observe and (self.is_log_step(s) or force_log)
        grads: dict[int, dict[str, np.ndarray]] = {}
        backward_done: list[int] = []
        for i, run in enumerate(self.runs):
            if not run.alive:
                continue
            run.model.train()
            taps = GradTaps(cfg.layers, cfg.heads) if log else None
            logits = run.model(batch.inputs, batch.readout, batch.mask, taps=taps)
            loss = F.cross_entropy(logits, batch.targets)
            loss_value = float(loss.detach())
            if not math.isfinite(loss_value):
                run.diverged_step = s
                continue
            run.opt.zero_grad(set_to_none=True)
            loss.backward()
            backward_done.append(i)
            run.loss_sum += loss_value
            run.acc_sum += float((logits.argmax(dim=1) == batch.targets).float().mean())
            run.count += 1
            if log:
                grads[i] = {**self._grad_norms(run.model), **taps.metrics()}
        if log:  # observe the weights after s updates, before update s + 1
            self._record(s, grads)
        if s < cfg.steps:
            lr = cfg.lr * cfg.lr_factor(s)
            for i in backward_done:
                run = self.runs[i]
                if run.alive:
                    for group in run.opt.param_groups:  # (muP: a scale per group)
                        group["lr"] = lr * group.get("lr_scale", 1.0)
                    if cfg.grad_clip > 0:
                        torch.nn.utils.clip_grad_norm_(run.model.parameters(), cfg.grad_clip)
                    run.opt.step()
                    if run.clips:
                        self._qk_clip(run, batch)
        self.next_iter += 1
        self.elapsed += time.perf_counter() - start
        self._iters_timed += 1
        return log

    def _qk_clip(self, run: _Run, batch: Any) -> None:
        """qkclip after the update: rescale the heads above tau on this batch, count them."""
        clipped = clip_heads(run.model, batch.inputs, batch.mask, batch.lengths,
                             self.cfg.qk_clip_tau).cpu().numpy()
        run.clip_since_log += clipped
        run.clipped_per_step.append(int(clipped.sum()))

    def _grad_norms(self, model: AttentionModel) -> dict[str, np.ndarray]:
        h = self.cfg.heads
        out: dict[str, list[np.ndarray]] = {"grad_norm_q": [], "grad_norm_k": [], "grad_norm_v": [],
                                            "grad_norm_o": []}
        with torch.no_grad():
            for blk in model.blocks:
                a = blk.attn
                for key, lin, axis in (("grad_norm_q", a.w_q, 0), ("grad_norm_k", a.w_k, 0),
                                       ("grad_norm_v", a.w_v, 0), ("grad_norm_o", a.w_o, 1)):
                    g = lin.weight.grad
                    if g is None:
                        out[key].append(np.zeros(h))
                        continue
                    g = g.view(h, a.d_k, -1) if axis == 0 else g.view(-1, h, a.d_k).transpose(0, 1)
                    out[key].append(g.reshape(h, -1).double().norm(dim=1).cpu().numpy())
        return {k: np.stack(v) for k, v in out.items()}

    def _record(self, s: int, grads: dict[int, dict[str, np.ndarray]]) -> None:
        """The log at step s: every run that did its backward pass is observed on the probe batch
        (and at the evaluation lengths when due); a run that turns non-finite diverges here."""
        cfg = self.cfg
        log = _LogRecord(cfg, len(self.runs))
        lengths = self.probe.lengths.cpu().numpy()
        evaluate = cfg.evaluates_lengths_at(s)
        for i, run in enumerate(self.runs):
            if run.alive and i in grads:
                self._record_run(s, i, run, grads[i], log, lengths, evaluate)
        self._append_log(s, log, evaluate)

    def _record_run(self, s: int, i: int, run: _Run, grads: dict[str, np.ndarray],
                    log: _LogRecord, lengths: np.ndarray, evaluate: bool) -> None:
        """Run i's row of the log at step s: training means since the last log, the probe's loss
        and accuracy, the gradient norms and the per-head statistics."""
        cfg = self.cfg
        p_loss, p_acc, capture = self._probe(run)
        if not math.isfinite(p_loss) or any(
                not bool(torch.isfinite(c.logits).all()) for c in capture) or any(
                not np.isfinite(g).all() for g in grads.values()):
            run.diverged_step = s  # (an Inf/NaN gradient would poison the next update)
            return
        log.valid[i] = True
        scal, head = log.scalars, log.heads
        scal["loss"][i] = run.loss_sum / max(run.count, 1)
        scal["accuracy"][i] = run.acc_sum / max(run.count, 1)
        scal["probe_loss"][i], scal["probe_accuracy"][i] = p_loss, p_acc
        run.loss_sum = run.acc_sum = 0.0
        run.count = 0
        if evaluate:
            for key, value in evaluate_lengths(run.model, cfg, self.device).items():
                scal[key][i] = value
        for key, arr in grads.items():
            head[key][i] = arr
        for layer, cap in enumerate(capture):
            self._record_layer(i, layer, run, cap, log, lengths)
        run.clip_since_log[:] = 0  # (read by _record_layer)
        if not log.finite(i):
            run.diverged_step = s  # e.g. a learned temperature that overflowed: no NaN/Inf out
            log.blank(i)

    def _probe(self, run: _Run) -> tuple[float, float, list[AttentionCapture]]:
        """Run's loss and accuracy on the fixed probe batch, with every layer's attention."""
        probe = self.probe
        capture: list[AttentionCapture] = []
        run.model.eval()
        with torch.no_grad():
            out = run.model(probe.inputs, probe.readout, probe.mask, capture)
            p_loss = float(F.cross_entropy(out, probe.targets))
            p_acc = float((out.argmax(dim=1) == probe.targets).float().mean())
        return p_loss, p_acc, capture

    def _record_layer(self, i: int, layer: int, run: _Run, cap: AttentionCapture,
                      log: _LogRecord, lengths: np.ndarray) -> None:
        """Per-head statistics of one layer's probe attention, and its learned parameters."""
        head = log.heads
        st = head_stats(cap.logits.double().cpu().numpy(), cap.mask.cpu().numpy(), lengths,
                        self.edges, self.cfg.saturation_threshold, run.rule,
                        sink=None if cap.sink is None else cap.sink.double().cpu().numpy(),
                        pre_logits=None if cap.pre_logits is None
                        else cap.pre_logits.double().cpu().numpy(),
                        softcap=self.cfg.softcap)
        head["entropy_norm"][i, layer] = st.entropy_norm
        head["logit_mean"][i, layer] = st.logit_mean
        head["logit_std"][i, layer] = st.logit_std
        head["logit_max_abs"][i, layer] = st.logit_max_abs
        head["top_weight"][i, layer] = st.top_weight
        head["saturated_frac"][i, layer] = st.saturated_frac
        head["jacobian_fro"][i, layer] = st.jacobian_fro
        head["key_mass"][i, layer] = st.key_mass
        head["sink_weight"][i, layer] = st.sink_weight
        if cap.sink is not None:
            head["sink_logit"][i, layer] = cap.sink.double().cpu().numpy()
        if run.clips:
            head["clip_count"][i, layer] = run.clip_since_log[layer]
        log.hist[i, layer], log.outside[i, layer], log.pct[i, layer] = (
            st.hist_counts, st.hist_outside, st.percentiles)
        self._probe_w[i, layer] = st.probe_weights
        t = run.model.blocks[layer].attn.log_t
        if t is not None:
            head["temperature"][i, layer] = t.detach().exp().view(-1).double().cpu().numpy()
        s_param = run.model.blocks[layer].attn.ssmax_s  # ssmax: the learned s per head
        if s_param is not None:
            head["ssmax_s"][i, layer] = s_param.detach().view(-1).double().cpu().numpy()

    def _append_log(self, s: int, log: _LogRecord, evaluate: bool) -> None:
        """Count the logs each head has spent below the collapse threshold, then keep the log."""
        below = (log.heads["entropy_norm"] < self.cfg.collapse_threshold) & log.valid[:, None, None]
        self._below = np.where(below, self._below + 1, 0)
        self._below_since = np.where(below, np.where(self._below_since < 0, s, self._below_since), -1)
        self._steps.append(np.int64(s))
        self._valid.append(log.valid)
        self._evaluated.append(np.bool_(evaluate))
        for k, v in log.scalars.items():
            self._scalars[k].append(v)
        for k, v in log.heads.items():
            self._heads[k].append(v)
        self._hist.append(log.hist)
        self._outside.append(log.outside)
        self._pct.append(log.pct)

    # -- output --------------------------------------------------------------------------------
    def snapshot(self) -> TrainingSnapshot:
        cfg = self.cfg
        collapse = np.where(self._below >= cfg.collapse_logs, self._below_since, -1)
        rate = self._iters_timed / self.elapsed if self.elapsed > 0 else 0.0
        return TrainingSnapshot(
            config=cfg, rules=tuple(run.rule for run in self.runs), step=self.step,
            done=self.done, elapsed_s=self.elapsed, steps_per_s=rate, device=self.device,
            log_steps=self._steps.view(), valid=self._valid.view(),
            scalars={k: g.view() for k, g in self._scalars.items()},
            heads={k: g.view() for k, g in self._heads.items()},
            hist_edges=self.edges, logit_hist=self._hist.view(), logit_outside=self._outside.view(),
            logit_percentiles=self._pct.view(), probe_weights=self._probe_w.copy(),
            has_temperature=np.array([run.model.blocks[0].attn.log_t is not None
                                      for run in self.runs]),
            diverged_step=np.array([run.diverged_step for run in self.runs], dtype=np.int64),
            collapse_step=collapse, length_evaluated=self._evaluated.view(),
            clipped_per_step=self._clipped_per_step(),
        )

    def _clipped_per_step(self) -> np.ndarray:
        """(R, updates) heads clipped after each update (0 for rules that do not clip; a run
        that diverged stops early and keeps 0 for the updates it did not do)."""
        out = np.zeros((len(self.runs), self.step), dtype=np.int64)
        for r, run in enumerate(self.runs):
            out[r, : len(run.clipped_per_step)] = run.clipped_per_step[: self.step]
        return out

    def iterate(self, cancelled: Callable[[], bool] | None = None,
                min_interval_s: float = 0.0) -> Iterator[TrainingSnapshot]:
        """Run until done, yielding a snapshot after log steps (at most one per
        ``min_interval_s``) and always at the end. Returns quietly when ``cancelled()`` is true,
        leaving the state where it is (so a later ``iterate()`` resumes: that is pause)."""
        last = -math.inf
        while not self.done:
            if cancelled is not None and cancelled():
                return
            if self.advance() and not self.done:
                now = time.perf_counter()
                if now - last >= min_interval_s:
                    last = now
                    yield self.snapshot()
        yield self.snapshot()

    def state_dicts(self) -> dict[str, dict[str, torch.Tensor]]:
        """The weights of every run, on the CPU (for export)."""
        return {run.rule: {k: v.detach().cpu().clone() for k, v in run.model.state_dict().items()}
                for run in self.runs}

    def save_weights(self, path: Any) -> None:
        """All runs' weights in one ``torch.save`` file (``{rule: state_dict}``), written atomically."""
        import io

        from engine.io import atomic_write_bytes

        buf = io.BytesIO()
        torch.save({"config": self.cfg.to_dict(), "step": self.step,
                    "weights": self.state_dicts()}, buf)
        atomic_write_bytes(path, buf.getvalue())


def run_training(cfg: TrainingConfig,
                 on_snapshot: Callable[[TrainingSnapshot], None] | None = None,
                 cancelled: Callable[[], bool] | None = None) -> tuple[Trainer, TrainingSnapshot]:
    """The callback form: run to the end; returns the trainer (for its weights) and the last
    snapshot."""
    trainer = Trainer(cfg)
    last = None
    for snap in trainer.iterate(cancelled):
        if on_snapshot is not None:
            on_snapshot(snap)
        last = snap
    return trainer, last if last is not None else trainer.snapshot()

