"""Serving engines' speculative-decoding metrics in (`specdec.engines.metrics`), and their
configuration out (`specdec.engines.configs`). torch-free."""
