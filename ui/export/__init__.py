"""Exports: a plot's PNG/SVG/CSV files, the export dialog, portable SVGs and the figure writers of
the headless commands."""
