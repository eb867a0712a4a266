"""Presentation mode: larger type, one plot at a time, and its parameter bar."""
