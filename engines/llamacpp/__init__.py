"""llama.cpp: its speculative-decoding output in (`metrics`), its draft-length flags out
(`config`). An engine of the registry (`specdec.engines.registry`)."""
from specdec.engines.llamacpp.config import config_lines, configure
from specdec.engines.llamacpp.metrics import parse_json, parse_text

name = "llamacpp"
label = "llama.cpp"
text_formats = "llama.cpp speculative output"
json_formats = "llama-server timings with drafts"

__all__ = ["config_lines", "configure", "parse_json", "parse_text"]
