"""Test configuration: Qt runs headless; hypothesis keeps CI fast and reproducible."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("ATTENTION_LAB_SETTINGS", "memory")  # never touch the user's QSettings

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=60, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("ci")
