"""The simulation page: the live plot panels and the results table."""
