"""One CPU kernel set for every process, so training agrees bit for bit across x86 machines.

Unscaled training is chaotic: its outcome flips with the width of the vector kernels torch and MKL
pick for the CPU (demo preset, seed 1, ``none`` at step 300: accuracy 0.447 with AVX-512 kernels,
0.109 with AVX2). Pinning both libraries to AVX2, which every x86-64 CPU of the last decade has,
makes AVX2 and AVX-512 machines of one vendor compute the same numbers (not an Intel and an
AMD machine: MKL and the kernels take other paths there; the same run ends at 0.672 on an AMD
EPYC under this pin, docs/NUMERICS.md). It must happen before torch runs its
first operation (the choice is made once, at the first kernel dispatch), which is why the
``engine`` package calls :func:`pin_cpu_kernels` when it is imported, before anything imports
torch. (Importing torch first is harmless: torch reads the variable at its first kernel
dispatch, not at import; if an operation already ran, the pin comes too late and a warning says
so.) A variable the user has set is kept (``ATEN_CPU_CAPABILITY=default`` restores torch's
choice). Every experiment job records the kernels it really ran on (``kernels_in_use``), and
that is part of its fingerprint (``engine.experiments.fingerprint``). What still differs: ARM
CPUs, and CUDA (other kernels altogether); docs/NUMERICS.md.
"""

from __future__ import annotations

import os
import platform
import sys
import warnings

#: environment variables read by ATen (torch's kernels) and by MKL (its matrix products)
PINNED = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}
X86 = {"x86_64", "amd64", "i686", "i386", "x86"}


def pin_cpu_kernels() -> dict[str, str]:
    """Set the pinned kernel variables where the user has not; returns what is in effect."""
    if platform.machine().lower() not in X86:
        return {}
    for name, value in PINNED.items():
        os.environ.setdefault(name, value)
    torch = sys.modules.get("torch")
    if torch is not None and os.environ["ATEN_CPU_CAPABILITY"] == PINNED["ATEN_CPU_CAPABILITY"]:
        got = str(torch.backends.cpu.get_cpu_capability())  # (decides it now, if still open)
        if got.lower() != PINNED["ATEN_CPU_CAPABILITY"]:
            warnings.warn(f"torch already runs {got} kernels (an operation ran before engine was "
                          "imported): training may differ from other machines' in the last bits",
                          RuntimeWarning, stacklevel=2)
    return {name: os.environ[name] for name in PINNED}


def kernel_capability() -> str:
    """The kernel set torch actually uses in this process (e.g. ``AVX2``; imports torch)."""
    import torch

    return str(torch.backends.cpu.get_cpu_capability())


def kernels_in_use() -> str:
    """What decides the CPU arithmetic of this process: the machine, torch's kernel set and MKL's
    instruction setting, e.g. ``x86_64 aten=AVX2 mkl=AVX2`` (imports torch)."""
    mkl = os.environ.get("MKL_ENABLE_INSTRUCTIONS", "") or "auto"
    return f"{platform.machine().lower()} aten={kernel_capability()} mkl={mkl}"
