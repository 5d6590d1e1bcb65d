"""vLLM: its speculative-decoding metrics in (`metrics`), its `--speculative-config` out
(`config`). An engine of the registry (`specdec.engines.registry`)."""
from specdec.engines.vllm.config import config_lines, configure
from specdec.engines.vllm.metrics import (parse_json, parse_prometheus, parse_text, parse_vllm_v0_log,
                                          parse_vllm_v1_log)

name = "vllm"
label = "vLLM"
text_formats = "vLLM /metrics text or 'SpecDecoding metrics' / 'Speculative metrics' log lines"
json_formats = "vLLM speculative-decoding statistics"

__all__ = ["config_lines", "configure", "parse_json", "parse_prometheus", "parse_text", "parse_vllm_v0_log",
           "parse_vllm_v1_log"]
