"""Audit a deployed port of a model (an ONNX Runtime graph, a GGUF file) against its source."""
