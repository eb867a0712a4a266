"""The process pool that experiments, claims and estimates run their jobs on, and how it stops.

Its own module so that ``runner`` (which runs experiments) and ``estimate`` (which the runner
asks for a time estimate) both use it without importing each other.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import sys

#: how often the runner checks the cancel flag and reports progress while jobs run
POLL_S = 0.1
#: imported once by the fork server, so each worker starts with torch loaded (torch.optim's first
#: use imports torch._dynamo: seconds per worker otherwise)
PRELOAD = ["torch", "torch._dynamo", "engine.training.trainer", "engine.experiments.job"]


def default_workers() -> int:
    return os.cpu_count() or 1


def process_pool(workers: int, start_method: str | None = None) -> cf.ProcessPoolExecutor:
    """Workers forked from a server that has imported torch once (fast to start, and no fork of
    a process with torch threads); spawn where forkserver does not exist, or when asked (a
    spawned worker's start never waits for the fork server's preload)."""
    import multiprocessing as mp

    if start_method == "spawn":
        ctx = mp.get_context("spawn")
    elif sys.platform != "win32" and "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(PRELOAD)
    else:
        ctx = mp.get_context("spawn")
    return cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx)


def stop_executor(executor: cf.Executor, owned: bool, futures: list[cf.Future]) -> None:
    """Cancel what has not started and, for a pool of our own, end the workers now (their jobs
    are lost; the finished ones are on disk)."""
    for fut in futures:
        fut.cancel()
    if not owned:
        return
    procs = []
    if isinstance(executor, cf.ProcessPoolExecutor):
        procs = list((getattr(executor, "_processes", None) or {}).values())
    try:
        executor.shutdown(wait=False, cancel_futures=True)
    except TypeError:  # Dask's ClientExecutor: shutdown(wait=False) cancels what is pending
        executor.shutdown(wait=False)
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(timeout=1.0)
