"""Attention Scaling Lab compute engine: pure Python + NumPy/torch, never Qt."""

from engine.cpu_kernels import pin_cpu_kernels

# before anything imports torch: the same kernels on every x86 machine (engine/cpu_kernels.py)
pin_cpu_kernels()
