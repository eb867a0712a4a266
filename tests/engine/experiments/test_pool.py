"""The experiments' process pool: its size, its start method and preload, and how it stops (on
fakes: no worker process is started). About 0.05 s."""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
import multiprocessing.forkserver as forkserver

import pytest

import engine.experiments.pool as pool


def test_default_workers_is_one_per_core_or_one(monkeypatch):
    monkeypatch.setattr(pool.os, "cpu_count", lambda: 6)
    assert pool.default_workers() == 6
    monkeypatch.setattr(pool.os, "cpu_count", lambda: None)
    assert pool.default_workers() == 1


def _made(monkeypatch) -> list[dict]:
    """ProcessPoolExecutor replaced by a recorder of its arguments."""
    made: list[dict] = []
    monkeypatch.setattr(pool.cf, "ProcessPoolExecutor",
                        lambda **kw: made.append(kw) or kw)
    return made


def test_a_pool_forks_from_a_server_that_preloaded_torch(monkeypatch):
    made = _made(monkeypatch)
    monkeypatch.setattr(pool.sys, "platform", "linux")
    preload = []
    real = mp.get_context

    def context(method):
        ctx = real(method)
        if method == "forkserver":
            monkeypatch.setattr(ctx, "set_forkserver_preload", preload.append)
        return ctx
    monkeypatch.setattr(mp, "get_context", context)
    pool.process_pool(3)
    assert made[0]["max_workers"] == 3
    assert made[0]["mp_context"].get_start_method() == "forkserver"
    assert preload == [["torch", "torch._dynamo", "engine.training.trainer",
                        "engine.experiments.job"]]
    pool.process_pool(2, start_method="spawn")
    assert made[1]["mp_context"].get_start_method() == "spawn" and len(preload) == 1
    pool.process_pool(2, start_method="forkserver")  # (only "spawn" is a request)
    assert made[2]["mp_context"].get_start_method() == "forkserver"


def test_spawn_where_there_is_no_fork_server(monkeypatch):
    made = _made(monkeypatch)
    monkeypatch.setattr(pool.sys, "platform", "win32")
    pool.process_pool(1)
    monkeypatch.setattr(pool.sys, "platform", "linux")
    monkeypatch.setattr(mp, "get_all_start_methods", lambda: ["fork", "spawn"])
    pool.process_pool(4)
    assert [(m["max_workers"], m["mp_context"].get_start_method()) for m in made] == [
        (1, "spawn"), (4, "spawn")]


def test_the_real_preload_is_set_on_the_fork_server():
    if "forkserver" not in mp.get_all_start_methods():
        pytest.skip("no fork server here")
    ex = pool.process_pool(1)  # (no worker starts before a job is submitted)
    try:
        assert forkserver._forkserver._preload_modules == pool.PRELOAD
    finally:
        ex.shutdown()


class Proc:
    def __init__(self, alive: bool) -> None:
        self.alive, self.calls = alive, []

    def is_alive(self) -> bool:
        return self.alive

    def terminate(self) -> None:
        self.calls.append("terminate")

    def join(self, timeout=None) -> None:
        self.calls.append(("join", timeout))


class ProcessPool(cf.ProcessPoolExecutor):
    def __init__(self, procs) -> None:  # (no real pool)
        self._processes = procs
        self.shut: list = []

    def shutdown(self, wait=True, *, cancel_futures=False) -> None:
        self.shut.append((wait, cancel_futures))


def _futures():
    waiting, running, done = cf.Future(), cf.Future(), cf.Future()
    running.set_running_or_notify_cancel()
    done.set_result(1)
    return waiting, running, done


def test_an_owned_pool_cancels_what_waits_and_ends_its_workers_now():
    alive, dead = Proc(True), Proc(False)
    ex = ProcessPool({1: alive, 2: dead})
    waiting, running, done = _futures()
    pool.stop_executor(ex, True, [waiting, running, done])
    assert (waiting.cancelled(), running.cancelled(), done.cancelled()) == (True, False, False)
    assert ex.shut == [(False, True)]
    assert alive.calls == ["terminate", ("join", 1.0)] and dead.calls == [("join", 1.0)]


def test_a_given_executor_only_has_its_waiting_jobs_cancelled():
    alive = Proc(True)
    ex = ProcessPool({1: alive})
    waiting, running, _ = _futures()
    pool.stop_executor(ex, False, [waiting, running])
    assert waiting.cancelled() and not running.cancelled()
    assert ex.shut == [] and alive.calls == []


def test_a_pool_without_processes_and_a_dask_executor_are_shut_without_waiting():
    ex = ProcessPool(None)
    pool.stop_executor(ex, True, [])
    assert ex.shut == [(False, True)]

    class Dask:  # ClientExecutor.shutdown takes no cancel_futures
        def __init__(self) -> None:
            self.shut: list = []

        def shutdown(self, wait=True) -> None:
            self.shut.append(wait)

    dask = Dask()
    pool.stop_executor(dask, True, [])
    assert dask.shut == [False]


def test_a_pool_that_never_had_processes_is_shut_too():
    ex = ProcessPool(None)
    del ex._processes  # (another Python's pool may keep its workers elsewhere)
    pool.stop_executor(ex, True, [])
    assert ex.shut == [(False, True)]
