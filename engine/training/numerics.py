"""One numerics and thread policy for every training step, wherever it runs (``train``, the
Training page, experiment jobs): single-threaded torch and subnormal floats flushed to zero.

Why single-threaded: torch's CPU results depend on the thread count (reductions split
differently), so a run must not change with the machine or with how many jobs share it.
Why flush: a saturated softmax (no scaling) produces weights that underflow into subnormal floats,
which the CPU handles many times slower; flushing them to zero makes an unscaled run as fast per
step as a scaled one and changes only values below float32's normal range (~1.18e-38).

Both settings are restored when the block ends, so nothing else in the process changes. The
flush mode lives in the calling thread's floating-point control register (torch has no getter),
so it is read back by a probe computation.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

#: float32's smallest normal number
FLOAT32_TINY = 1.1754943508222875e-38
#: threads torch uses inside a training step
STEP_THREADS = 1


def flush_denormal_enabled() -> bool:
    """True when this thread flushes subnormal floats to zero (1e-30 x 1e-9 gives 0)."""
    x = torch.tensor([1e-30], dtype=torch.float32)
    return bool((x * 1e-9)[0] == 0)


@contextlib.contextmanager
def training_numerics(flush: bool = True, threads: int = STEP_THREADS) -> Iterator[None]:
    """Run the block single-threaded with subnormals flushed; restore both afterwards."""
    prev_threads = torch.get_num_threads()
    prev_flush = flush_denormal_enabled()
    if prev_threads != threads:
        torch.set_num_threads(threads)
    if prev_flush != flush:
        torch.set_flush_denormal(flush)
    try:
        yield
    finally:
        if prev_flush != flush:
            torch.set_flush_denormal(prev_flush)
        if torch.get_num_threads() != prev_threads:
            torch.set_num_threads(prev_threads)
