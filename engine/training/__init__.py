"""Training lab: a tiny attention model trained under several scaling rules side by side.

``config``, ``presets`` and ``observe`` are torch-free (the GUI form and ``--help`` use them);
``model``, ``tasks`` and ``trainer`` import torch, so import them lazily.
"""
