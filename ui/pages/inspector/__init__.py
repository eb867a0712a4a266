"""The score inspector: softmax, Jacobian and entropy of a handful of scores typed by the user.

Import the widget from ``ui.pages.inspector.page`` (this package imports no Qt by itself).
"""
