"""Serving engines' speculative-decoding metrics in (`specdec.engines.metrics`, turned into
alpha_i by `specdec.engines.acceptance`), and their configuration out
(`specdec.engines.configs`); the plan between is `specdec.simulator.engine_plan`. torch-free."""
