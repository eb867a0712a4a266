"""Reading files the lab did not necessarily write: every one is untrusted input.

One reader per file format; each reads through :mod:`engine.readers.json_file` (size first, then
depth, and no NaN or Infinity) and checks the structure and the types with a schema
(:mod:`engine.readers.schema`) before any field reaches the engine. Every problem is one
:class:`engine.errors.FileFormatError`: ``FILE: field path: what is wrong``.
"""
