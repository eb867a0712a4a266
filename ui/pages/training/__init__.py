"""The Training page: live training of a tiny attention model under several scaling rules."""
