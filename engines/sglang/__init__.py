"""SGLang: its speculative-decoding metrics in (`metrics`), its server flags out (`config`, also
the flags of an EAGLE-2 tree). An engine of the registry (`specdec.engines.registry`)."""
from specdec.engines.sglang.config import (SGLANG_ALGORITHM, config_lines, configure, sglang_flags,
                                          sglang_tree)
from specdec.engines.sglang.metrics import parse_json, parse_text

name = "sglang"
label = "SGLang"
text_formats = "SGLang /metrics text or 'Decode batch' log lines"
json_formats = "SGLang meta_info spec counts"

__all__ = ["SGLANG_ALGORITHM", "config_lines", "configure", "parse_json", "parse_text", "sglang_flags",
           "sglang_tree"]
