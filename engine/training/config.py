"""Frozen, validated parameters of a training comparison (several scaling rules, one model shape).

No torch here: the GUI and ``--help`` import this module to build widgets and options.

Init scale of W_Q and W_K (``qk_init``): entries are drawn from N(0, qk_init^2 / d_model). With the
pre-attention LayerNorm on (the default), the attention input has unit-variance entries, so each q
and k entry has variance qk_init^2 at init: qk_init = 1 gives unit-variance q and k, the setting in
which q.k has variance d_k (docs/SCIENCE.md) and the scaling rules differ the most.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from engine.config import SEED_MAX, TEMPERATURE_RANGE
from engine.errors import ConfigError
from engine.rules import SOFTCAP_DEFAULT, TRAINING_RULES
from engine.validate import (
    ConfigMethods,
    check_choice,
    check_choices,
    check_float,
    check_int,
    quote,
)

TASKS = ("retrieval", "recall")
OPTIMIZERS = ("adam", "sgd")
#: learning-rate decay after the warmup
DECAYS = ("none", "cosine")
DEVICES = ("auto", "cpu", "cuda")
#: recall: how a token learns its position (retrieval has none: its items form a set).
#: ``learned`` = one embedding per trained position (only the trained length exists);
#: ``sinusoidal`` = the fixed sin/cos code of Vaswani et al. 2017 (any length);
#: ``none`` = no position signal but the causal mask itself (any length)
POSITIONS = ("learned", "sinusoidal", "none")
#: parametrization: ``sp`` = the standard one (the model as it always was) or ``mup`` (Yang et al.
#: 2022, Tensor Programs V; engine.training.parametrization)
PARAMS = ("sp", "mup")
#: muP: the dimension that is the width: d_model with the heads fixed (d_k = d_model / heads grows
#: with it) or the head width d_k with d_model fixed
WIDTH_AXES = ("d_model", "d_k")

#: default tau of ``qkclip`` (see ``TrainingConfig.qk_clip_tau``)
QK_CLIP_TAU_DEFAULT = 30.0
D_MODEL_MAX = 4096
HEADS_MAX = 64
LAYERS_MAX = 4
STEPS_MAX = 1_000_000
BATCH_MAX = 65_536
#: most histogram cells kept over a run (int32 counts: 400 MB)
HISTORY_CELLS_MAX = 100_000_000
#: memory guards, so a config at the options' bounds is refused with a named field instead of
#: exhausting the RAM: parameters over all runs (each float32 with its gradient and Adam's two
#: moments: 16 bytes) ...
PARAMS_MAX = 100_000_000
#: ... float32 activations of one training forward pass (attention maps and token states) ...
ACTIVATIONS_MAX = 100_000_000
#: ... and probe-batch logits over all layers (observed in float64, a few copies)
PROBE_LOGITS_MAX = 10_000_000


@dataclass(frozen=True)
class TrainingConfig(ConfigMethods):
    """Everything that determines a training comparison; with the seed, the curves are reproducible
    on CPU. Every rule in ``scalings`` trains from the same initial weights on the same batches."""

    # task
    task: str = "retrieval"
    #: retrieval: fewest and most items in a set (a query attends over 1 + items tokens)
    items_min: int = 4
    items_max: int = 16
    #: retrieval: width of the random key vectors; noise = std of the query's perturbation
    key_dim: int = 16
    noise: float = 0.2
    #: retrieval: number of labels; recall: number of value tokens (and of key tokens)
    classes: int = 16
    #: recall: key-value pairs per sequence (sequence length = 2 * pairs + 1)
    pairs: int = 8
    #: recall: position encoding (POSITIONS); learned only covers the trained 2 * pairs + 1 tokens
    positions: str = "learned"
    # model
    d_model: int = 256
    heads: int = 1
    #: head width; 0 means d_model / heads
    d_k: int = 0
    layers: int = 1
    mlp: bool = False
    layernorm: bool = True
    qk_init: float = 1.0
    #: parametrization (PARAMS); mup scales inits, multipliers and learning rates with the width
    param: str = "sp"
    #: mup: the dimension that is the width (WIDTH_AXES)
    width_axis: str = "d_model"
    #: mup: the width the muP multipliers are relative to; 0 = this model's own width (then
    #: every multiplier is 1). Experiments set it to the narrowest width of their grid
    base_width: int = 0
    #: mup: logits of the dk rule = attn_mult * q.k / d_k; 0 = sqrt(d_k at the base width), so
    #: that they equal q.k / sqrt(d_k) there
    attn_mult: float = 0.0
    # rules
    scalings: tuple[str, ...] = ("none", "sqrt", "dk")
    temperature: float = 1.0  #: T of the fixed ``temperature`` rule
    cosine_temperature: float = 0.1  #: initial (learned) T of the ``cosine`` rule
    softcap: float = SOFTCAP_DEFAULT  #: c of the ``softcap`` rule (Gemma 2's 50)
    #: tau of the ``qkclip`` rule: a head whose largest logit on the batch exceeds it is clipped
    #: back to it after the step (Kimi K2 uses 100; the tiny models here reach 30 within a few
    #: hundred steps at learning rates of 1e-2 and above, 100 only where sqrt already fails)
    qk_clip_tau: float = QK_CLIP_TAU_DEFAULT
    # optimisation
    optimizer: str = "adam"
    lr: float = 1e-3
    batch: int = 64
    steps: int = 300
    seed: int = 0
    device: str = "auto"
    #: linear warmup: update s (0-based) uses lr * (s + 1) / warmup while s < warmup
    warmup: int = 0
    #: none, or cosine from lr down to lr * lr_floor over the updates after the warmup
    decay: str = "none"
    lr_floor: float = 0.0
    #: decoupled weight decay (AdamW; SGD's own weight_decay); 0 keeps plain Adam / SGD
    weight_decay: float = 0.0
    #: clip the global gradient norm of each run's parameters to this; 0 = off
    grad_clip: float = 0.0
    # observation
    log_every: int = 10
    probe_size: int = 32
    hist_bins: int = 400
    #: logit histogram edges: [-hist_range, hist_range] (wide enough for no scaling at d_k = 256)
    hist_range: float = 100.0
    saturation_threshold: float = 0.99
    collapse_threshold: float = 0.05  #: entropy / log(n) below this ...
    collapse_logs: int = 3  #: ... at this many consecutive logs marks a head as collapsed
    #: lengths also evaluated without gradient (length generalization): retrieval set sizes
    #: (items, e.g. 4x, 16x, 64x items_max) or recall key-value pairs (e.g. 4x, 16x pairs);
    #: empty = none
    eval_lengths: tuple[int, ...] = ()
    #: examples per evaluation length
    eval_size: int = 128
    #: evaluate the lengths at every K-th log (log steps 0, K * log_every, ...) and always at the
    #: last step; 1 = at every log
    eval_every: int = 1

    def __post_init__(self) -> None:
        """Each group of fields in turn (the first bad field raises), then the memory guards."""
        _check_task(self)
        _check_model(self)
        _check_optimisation(self)
        _check_observation(self)
        _check_eval_lengths(self)
        _check_memory(self)

    # -- derived -------------------------------------------------------------------------------
    @property
    def head_dim(self) -> int:
        """d_k actually used (``d_k`` or d_model / heads)."""
        return self.d_k or self.d_model // self.heads

    @property
    def width(self) -> int:
        """The muP width: d_model or d_k (``width_axis``)."""
        return self.d_model if self.width_axis == "d_model" else self.head_dim

    def at_width(self, width: int) -> TrainingConfig:
        """This config with its width (``width_axis``) set to ``width``, all else kept."""
        return self.replace(**{self.width_axis: width})

    @property
    def mup_base_width(self) -> int:
        """The width the muP multipliers are relative to (``base_width``, or the own width)."""
        return self.base_width or self.width

    @property
    def mup_attn_mult(self) -> float:
        """muP's attention multiplier: ``attn_mult``, or sqrt(d_k at the base width)."""
        if self.attn_mult > 0:
            return self.attn_mult
        if self.width_axis == "d_k":
            return math.sqrt(self.mup_base_width)
        return math.sqrt(self.d_k or self.mup_base_width // self.heads)

    @property
    def seq_len(self) -> int:
        """Tokens per example (retrieval: the query + the largest set)."""
        return 1 + self.items_max if self.task == "retrieval" else 2 * self.pairs + 1

    @property
    def in_features(self) -> int:
        """Width of a retrieval token's features: [key vector, one-hot label, is-query]."""
        return self.key_dim + self.classes + 1

    @property
    def vocab(self) -> int:
        """Recall tokens: keys 0..C-1, values C..2C-1."""
        return 2 * self.classes

    @property
    def n_params(self) -> int:
        """Parameters of one run's model (without the cosine rule's H learned temperatures)."""
        d, inner, c = self.d_model, self.heads * self.head_dim, self.classes
        layer = 4 * d * inner
        if self.mlp:
            layer += 8 * d * d + 5 * d + (2 * d if self.layernorm else 0)  # fc, proj, ln2
        if self.layernorm:
            layer += 2 * d  # ln1
        embed = (self.in_features * d + d if self.task == "retrieval"
                 else self.vocab * d + (self.seq_len * d if self.positions == "learned" else 0))
        return embed + self.layers * layer + (2 * d if self.layernorm else 0) + d * c + c

    @property
    def activations_per_forward(self) -> int:
        """Rough float32 count held for the backward pass of one training batch (one run)."""
        t, inner, d = self.seq_len, self.heads * self.head_dim, self.d_model
        per_token = 4 * inner + 4 * d + (8 * d if self.mlp else 0)
        return self.batch * self.layers * (3 * self.heads * t * t + t * per_token)

    def lr_factor(self, s: int) -> float:
        """Multiplier of ``lr`` for update s (0-based: the update that follows the log at step s).
        Exactly 1.0 with no warmup and no decay, so such runs are unchanged bit for bit."""
        factor = 1.0
        if s < self.warmup:
            factor = (s + 1) / self.warmup
        elif self.decay == "cosine":
            span = max(self.steps - self.warmup, 1)
            progress = min((s - self.warmup) / span, 1.0)
            factor = self.lr_floor + (1.0 - self.lr_floor) * 0.5 * (1.0 + math.cos(math.pi * progress))
        return factor

    def evaluates_lengths_at(self, s: int) -> bool:
        """The evaluation lengths are measured at log step s: every ``eval_every``-th regular
        log (0, eval_every * log_every, ...) and always at the last step."""
        if not self.eval_lengths:
            return False
        if s == self.steps:
            return True
        return s % self.log_every == 0 and (s // self.log_every) % self.eval_every == 0

    @property
    def log_steps(self) -> tuple[int, ...]:
        """Steps at which the runs are observed: 0, log_every, 2*log_every, ..., and the last."""
        steps = list(range(0, self.steps, self.log_every))
        if steps[-1] != self.steps:
            steps.append(self.steps)
        return tuple(steps)


def _check_task(cfg: TrainingConfig) -> None:
    """The task's fields: set sizes and keys (retrieval), pairs and positions (recall)."""
    s = object.__setattr__
    check_choice("task", cfg.task, TASKS)
    s(cfg, "items_min", check_int("items_min", cfg.items_min, 1, 1024))
    s(cfg, "items_max", check_int("items_max", cfg.items_max, 1, 1024))
    if cfg.items_max < cfg.items_min:
        raise ConfigError("items_max", f"must be >= items_min ({cfg.items_min}), got {cfg.items_max}")
    s(cfg, "key_dim", check_int("key_dim", cfg.key_dim, 1, 4096))
    s(cfg, "noise", check_float("noise", cfg.noise, 0.0, 10.0))
    s(cfg, "classes", check_int("classes", cfg.classes, 2, 4096))
    s(cfg, "pairs", check_int("pairs", cfg.pairs, 1, 256))
    check_choice("positions", cfg.positions, POSITIONS)
    if cfg.task == "recall" and cfg.pairs > cfg.classes:
        raise ConfigError("pairs", f"must be <= classes ({cfg.classes}) so keys are distinct, "
                          f"got {cfg.pairs}")


def _check_model(cfg: TrainingConfig) -> None:
    """The model's shape and the scaling rules it is trained with."""
    s = object.__setattr__
    s(cfg, "d_model", check_int("d_model", cfg.d_model, 1, D_MODEL_MAX))
    s(cfg, "heads", check_int("heads", cfg.heads, 1, HEADS_MAX))
    s(cfg, "d_k", check_int("d_k", cfg.d_k, 0, D_MODEL_MAX))
    if cfg.d_k == 0 and cfg.d_model % cfg.heads:
        raise ConfigError("heads", f"must divide d_model ({cfg.d_model}) when d_k is 0 "
                          f"(= d_model / heads), got {cfg.heads}")
    s(cfg, "layers", check_int("layers", cfg.layers, 1, LAYERS_MAX))
    for name in ("mlp", "layernorm"):
        if not isinstance(getattr(cfg, name), bool):
            raise ConfigError(name, f"must be true or false, got {quote(getattr(cfg, name))}")
    s(cfg, "qk_init", check_float("qk_init", cfg.qk_init, 0.0, 100.0, lo_open=True))
    s(cfg, "scalings", check_choices("scalings", cfg.scalings, TRAINING_RULES))
    s(cfg, "temperature", check_float("temperature", cfg.temperature, *TEMPERATURE_RANGE))
    s(cfg, "cosine_temperature",
      check_float("cosine_temperature", cfg.cosine_temperature, *TEMPERATURE_RANGE))
    s(cfg, "softcap", check_float("softcap", cfg.softcap, 0.0, 1e6, lo_open=True))
    s(cfg, "qk_clip_tau", check_float("qk_clip_tau", cfg.qk_clip_tau, 0.0, 1e6, lo_open=True))
    _check_param(cfg)


def _check_param(cfg: TrainingConfig) -> None:
    """The parametrization; under mup the base width must give a valid model of the same shape
    (d_model / heads whole when d_k follows d_model). Ignored under sp."""
    s = object.__setattr__
    check_choice("param", cfg.param, PARAMS)
    check_choice("width_axis", cfg.width_axis, WIDTH_AXES)
    s(cfg, "base_width", check_int("base_width", cfg.base_width, 0, D_MODEL_MAX))
    s(cfg, "attn_mult", check_float("attn_mult", cfg.attn_mult, 0.0, 1e6))
    if cfg.param != "mup" or cfg.base_width == 0:
        return
    if cfg.width_axis == "d_model" and cfg.d_k == 0 and cfg.base_width % cfg.heads:
        raise ConfigError("base_width", f"must be a multiple of heads ({cfg.heads}) when d_k is "
                          f"d_model / heads, got {cfg.base_width}")


def _check_optimisation(cfg: TrainingConfig) -> None:
    """The optimizer, its schedule, the batch, the steps, the seed and the device."""
    s = object.__setattr__
    check_choice("optimizer", cfg.optimizer, OPTIMIZERS)
    s(cfg, "lr", check_float("lr", cfg.lr, 0.0, 100.0, lo_open=True))
    s(cfg, "batch", check_int("batch", cfg.batch, 1, BATCH_MAX))
    s(cfg, "steps", check_int("steps", cfg.steps, 1, STEPS_MAX))
    s(cfg, "seed", check_int("seed", cfg.seed, 0, SEED_MAX))
    check_choice("device", cfg.device, DEVICES)
    s(cfg, "warmup", check_int("warmup", cfg.warmup, 0, STEPS_MAX))
    check_choice("decay", cfg.decay, DECAYS)
    s(cfg, "lr_floor", check_float("lr_floor", cfg.lr_floor, 0.0, 1.0))
    s(cfg, "weight_decay", check_float("weight_decay", cfg.weight_decay, 0.0, 10.0))
    s(cfg, "grad_clip", check_float("grad_clip", cfg.grad_clip, 0.0, 1e6))


def _check_observation(cfg: TrainingConfig) -> None:
    """How the runs are observed: the logs, the probe batch, the histograms, the thresholds."""
    s = object.__setattr__
    s(cfg, "log_every", check_int("log_every", cfg.log_every, 1, STEPS_MAX))
    s(cfg, "probe_size", check_int("probe_size", cfg.probe_size, 1, 4096))
    s(cfg, "hist_bins", check_int("hist_bins", cfg.hist_bins, 2, 2000))
    s(cfg, "hist_range", check_float("hist_range", cfg.hist_range, 0.0, 1e6, lo_open=True))
    s(cfg, "saturation_threshold",
      check_float("saturation_threshold", cfg.saturation_threshold, 0.0, 1.0,
                  lo_open=True, hi_open=True))
    s(cfg, "collapse_threshold",
      check_float("collapse_threshold", cfg.collapse_threshold, 0.0, 1.0))
    s(cfg, "collapse_logs", check_int("collapse_logs", cfg.collapse_logs, 1, 10_000))


def _check_memory(cfg: TrainingConfig) -> None:
    """Refuse, naming a field, a config whose parameters, activations, probe logits or histogram
    history would exhaust the memory (each field is valid on its own by now)."""
    total = cfg.n_params * len(cfg.scalings)
    if total > PARAMS_MAX:
        raise ConfigError("d_model", f"{len(cfg.scalings)} rule(s) x {cfg.n_params:,} "
                          f"parameters = {total:,}, more than {PARAMS_MAX:,} (memory): use a "
                          "smaller d_model or d_k, fewer heads or layers, or fewer rules")
    acts = cfg.activations_per_forward
    if acts > ACTIVATIONS_MAX:
        raise ConfigError("batch", f"one forward pass holds ~{acts:,} activations, more than "
                          f"{ACTIVATIONS_MAX:,} (memory): use a smaller batch, shorter "
                          "sequences (items_max, pairs) or a smaller model")
    probe = cfg.probe_size * cfg.layers * cfg.heads * cfg.seq_len**2
    if probe > PROBE_LOGITS_MAX:
        raise ConfigError("probe_size", f"probe_size x layers x heads x tokens^2 = {probe:,} "
                          f"logits, more than {PROBE_LOGITS_MAX:,} (memory): use a smaller "
                          "probe batch")
    cells = len(cfg.log_steps) * len(cfg.scalings) * cfg.layers * cfg.heads * cfg.hist_bins
    if cells > HISTORY_CELLS_MAX:
        raise ConfigError("hist_bins", f"logs x rules x layers x heads x bins = {cells:,} "
                          f"histogram cells, more than {HISTORY_CELLS_MAX:,}: use fewer bins, "
                          "fewer heads or a larger log_every")


#: most items (retrieval) or pairs (recall) in an evaluation example: evaluation streams the
#: examples and the query rows in chunks (engine.training.lengths), so memory stays bounded
EVAL_ITEMS_MAX = 4096


def _check_eval_lengths(cfg: TrainingConfig) -> None:
    s = object.__setattr__
    s(cfg, "eval_size", check_int("eval_size", cfg.eval_size, 1, 65_536))
    s(cfg, "eval_every", check_int("eval_every", cfg.eval_every, 1, STEPS_MAX))
    lengths = tuple(check_int("eval_lengths", n, 1, EVAL_ITEMS_MAX) for n in cfg.eval_lengths)
    if len(set(lengths)) != len(lengths):
        raise ConfigError("eval_lengths", "lists a length twice")
    if lengths and cfg.task == "recall":
        if max(lengths) > cfg.classes:
            raise ConfigError("eval_lengths", f"recall: pairs must be <= classes ({cfg.classes}) "
                              f"so keys are distinct, got {max(lengths)}")
        if cfg.positions == "learned" and max(lengths) > cfg.pairs:
            raise ConfigError("positions", f"learned positions exist only for the trained "
                              f"{cfg.seq_len} tokens ({cfg.pairs} pairs), so eval_lengths up to "
                              f"{max(lengths)} pairs cannot be evaluated: choose positions "
                              "sinusoidal or none")
    s(cfg, "eval_lengths", lengths)


#: one sentence per parameter: the CLI's --help and the GUI's tooltips
FIELD_HELP: dict[str, str] = {
    "task": "retrieval (a set of keyed items, padding mask) or recall (k1 v1 ... kq -> vq, causal mask)",
    "items_min": "retrieval: fewest items in a set, 1..1024",
    "items_max": "retrieval: most items in a set, >= items_min (padding fills the rest)",
    "key_dim": "retrieval: width of the random key vectors",
    "noise": "retrieval: std of the query's noise relative to a key's entries, 0..10",
    "classes": "labels (retrieval), or key tokens and value tokens (recall), 2..4096",
    "pairs": "recall: key-value pairs per sequence, <= classes",
    "positions": "recall: position encoding: learned (one embedding per trained position, so "
                 "only the trained length), sinusoidal (fixed sin/cos, any length) or none (the "
                 "causal mask only, any length)",
    "d_model": "model width, 1..4096",
    "heads": "attention heads per layer, 1..64",
    "d_k": "head width d_k; 0 = d_model / heads",
    "layers": "attention layers, 1..4",
    "mlp": "an MLP after each attention layer",
    "layernorm": "pre-LayerNorm before attention (and MLP) and before the classifier",
    "qk_init": "W_Q, W_K ~ N(0, G^2/d_model): G = 1 gives unit-variance q and k entries at init "
               "(with the LayerNorm on)",
    "param": "parametrization: sp (standard) or mup (muP, Yang et al. 2022: zero-init W_Q and "
             "readout, readout x base_width/width, Adam lr of hidden matrices x base_width/width; "
             "the dk rule's logits x attn_mult)",
    "width_axis": "mup: the width is d_model (heads fixed, d_k grows) or d_k (d_model fixed)",
    "base_width": "mup: the width the multipliers are relative to (0 = this model's own width; "
                  "experiments: the narrowest width of the grid)",
    "attn_mult": "mup: the dk rule's logits are attn_mult x q.k / d_k; 0 = sqrt(d_k at the base "
                 "width), equal to the sqrt rule there",
    "scalings": "rules trained side by side from the same initial weights on the same batches",
    "temperature": "T of the fixed temperature rule (logits = q.k / T)",
    "cosine_temperature": "initial value of the cosine rule's learned temperature (logits = cos / T)",
    "softcap": "c of the softcap rule: logits = c tanh(q.k / sqrt(d_k) / c) (Gemma 2: 50)",
    "qk_clip_tau": "tau of the qkclip rule: after each step, W_Q and W_K of a head whose largest "
                   "logit on the batch exceeds tau are multiplied by sqrt(tau / largest) "
                   "(Kimi K2: 100; default 30, which these tiny models reach)",
    "optimizer": "adam or sgd",
    "lr": "learning rate (> 0)",
    "batch": "examples per step",
    "steps": "optimizer steps",
    "seed": "seed of the initial weights, the data stream and the probe batch",
    "device": "auto (CUDA when available), cpu or cuda",
    "warmup": "linear learning-rate warmup over this many updates (0 = off)",
    "decay": "none, or cosine from lr down to lr x lr_floor over the updates after the warmup",
    "lr_floor": "cosine decay ends at lr x this fraction, 0..1",
    "weight_decay": "decoupled weight decay (AdamW with adam), 0..10; 0 = plain Adam / SGD",
    "grad_clip": "clip each run's global gradient norm to this before the update; 0 = off",
    "log_every": "observe every K steps (probe batch, histograms, gradient norms)",
    "probe_size": "examples in the fixed probe batch the attention is observed on",
    "hist_bins": "bins of the logit histograms",
    "hist_range": "logit histogram edges span [-R, R], fixed so steps are comparable; the bins "
                  "are spaced evenly in asinh(x / (R/1000)): fine near 0, a few percent wide "
                  "further out",
    "saturation_threshold": "a row is saturated when its top weight exceeds this",
    "collapse_threshold": "a head whose entropy / log(n) stays below this is marked collapsed",
    "collapse_logs": "... for this many consecutive logs",
    "eval_lengths": "lengths also evaluated (no gradient): retrieval set sizes N (items, e.g. "
                    "64 256 1024 for 4x, 16x, 64x items_max = 16) or recall pairs N (<= classes, "
                    "e.g. 32 128 for 4x, 16x pairs = 8; needs positions sinusoidal or none "
                    "beyond pairs): accuracy_len{N}, entropy_norm_len{N} (long lengths cost: "
                    "see eval_every)",
    "eval_size": "examples per evaluation length",
    "eval_every": "evaluate the lengths at every K-th log and always at the last step "
                  "(1 = every log); the columns are empty at the other logs",
}
