"""The Training plots (one panel class per plot), shared by the Training page and the
``train --figures`` writer in ui.export.figure_writers."""
