"""Attention Scaling Lab compute engine: pure Python + NumPy/torch, never Qt."""
