"""User interfaces: the Qt desktop app (``ui.app``) and the headless command line (``ui.cli``).

Importing this package imports nothing heavy; Qt is imported only by the GUI modules.
"""
