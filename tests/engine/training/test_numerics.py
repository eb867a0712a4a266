"""The numerics policy of a training step (engine.training.numerics) on its own: the flush probe
reads the mode torch was set to, and the block sets threads and flush as asked and gives back
exactly what it found, whichever way round, on an error too. Milliseconds, no training."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from engine.training.numerics import (  # noqa: E402
    FLOAT32_TINY,
    STEP_THREADS,
    flush_denormal_enabled,
    training_numerics,
)


@pytest.fixture
def restore():
    """Threads and flush mode as they were before the test."""
    threads = torch.get_num_threads()
    torch.set_flush_denormal(False)
    yield
    torch.set_flush_denormal(False)
    torch.set_num_threads(threads)


def test_the_constants_are_float32s_smallest_normal_and_one_thread():
    assert FLOAT32_TINY == float(np.finfo(np.float32).tiny) == 2.0**-126
    assert STEP_THREADS == 1


def test_the_probe_reads_the_flush_mode(restore):
    assert not flush_denormal_enabled()
    assert torch.set_flush_denormal(True)  # (False where the CPU cannot flush)
    assert flush_denormal_enabled()
    torch.set_flush_denormal(False)
    assert not flush_denormal_enabled()


@pytest.mark.parametrize("outside_threads,outside_flush,threads,flush", [
    (2, False, 1, True),  # the trainer's case: a 2-thread process, no flush
    (1, True, 2, False),  # the other way round
    (1, False, 1, True),  # threads already right: only the flush changes
    (2, True, 2, True),  # nothing to change
])
def test_the_block_sets_what_it_is_asked_and_gives_back_what_it_found(
        restore, outside_threads, outside_flush, threads, flush):
    torch.set_num_threads(outside_threads)
    torch.set_flush_denormal(outside_flush)
    with training_numerics(flush=flush, threads=threads):
        assert torch.get_num_threads() == threads
        assert flush_denormal_enabled() == flush
    assert torch.get_num_threads() == outside_threads
    assert flush_denormal_enabled() == outside_flush


def test_the_defaults_are_one_thread_and_flushing_and_an_error_still_restores(restore):
    torch.set_num_threads(2)
    with pytest.raises(RuntimeError, match="inside"):
        with training_numerics():
            assert torch.get_num_threads() == 1 and flush_denormal_enabled()
            raise RuntimeError("inside")
    assert torch.get_num_threads() == 2 and not flush_denormal_enabled()


@pytest.mark.parametrize("outside", [1, 2])
def test_a_thread_count_changed_inside_the_block_is_put_back(restore, outside):
    """The block restores the count it found even when the step itself changed it, also when
    the block had nothing to change (1 thread already)."""
    torch.set_num_threads(outside)
    with training_numerics():
        torch.set_num_threads(3)
    assert torch.get_num_threads() == outside


def test_the_probe_reads_the_mode_whatever_the_default_dtype(restore):
    """1e-30 x 1e-9 is subnormal in float32 only: the probe must compute in float32 even where
    a library made float64 torch's default."""
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        torch.set_flush_denormal(True)
        assert flush_denormal_enabled()
        torch.set_flush_denormal(False)
        assert not flush_denormal_enabled()
    finally:
        torch.set_default_dtype(default)
