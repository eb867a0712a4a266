"""Experiments: grids of training runs (a base config x axes of values), run in parallel through
a ``concurrent.futures.Executor``, reproducible job by job, summarised with their uncertainty.

``spec``, ``summary``, ``figures`` and ``builtin`` are torch-free; ``job`` imports torch when a
job runs; ``runner`` runs the grid and writes the files.
"""
