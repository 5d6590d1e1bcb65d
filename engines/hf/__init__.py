"""Hugging Face transformers' `generate`: configuration out only (`config`); it reports no
speculative counts of its own. An engine of the registry (`specdec.engines.registry`)."""
from __future__ import annotations

from specdec.engines.counts import EngineCounts
from specdec.engines.hf.config import config_lines, configure

name = "hf"
label = "transformers"
text_formats = None
json_formats = None


def parse_text(text: str) -> EngineCounts | None:
    return None


def parse_json(objects: list) -> EngineCounts | None:
    return None


__all__ = ["config_lines", "configure", "parse_json", "parse_text"]
