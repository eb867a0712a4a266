"""The simulation page: six live plots and the results table."""
