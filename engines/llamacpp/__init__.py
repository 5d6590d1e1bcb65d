"""llama.cpp: its speculative-decoding output in (`metrics`), its draft-length flags out
(`config`), and — the engine specdec runs itself — llama-server as a child process (`server`)
with a client for its requests and timings (`client`). An engine of the registry
(`specdec.engines.registry`); the build: scripts/llamacpp.sh."""
from specdec.engines.llamacpp.config import config_lines, configure
from specdec.engines.llamacpp.metrics import parse_json, parse_text

name = "llamacpp"
label = "llama.cpp"
text_formats = "llama.cpp speculative output"
json_formats = "llama-server timings with drafts"
equal_split_batches = True  # -np B: one KV stream per slot, batches cut by split_equal (docs/engines.md)

__all__ = ["config_lines", "configure", "parse_json", "parse_text"]
