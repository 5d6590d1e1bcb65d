"""Serving engines, one package each (`engines/vllm/`, `sglang/`, `llamacpp/`, `hf/`) behind one
protocol and registry (`specdec.engines.registry`): their speculative-decoding metrics in
(`specdec.engines.metrics` recognises the format, `specdec.engines.acceptance` turns counts into
alpha_i) and their configuration out (`specdec.engines.configs`); the plan between is
`specdec.simulator.engine_plan`. torch-free."""
