"""Probe a real pretrained model: capture per-head queries and keys, compare with i.i.d. theory.

Nothing here imports ``transformers`` or ``torch`` at import time: the GUI and ``--help`` must
start without them, and the app must work when the optional ``models`` extra is not installed.
"""
