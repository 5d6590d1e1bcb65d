"""Loading Hugging Face causal LMs from local folders, and checking a target/draft pair.

Everything is local: the default target is the cached SmolLM2-135M-Instruct (see
specdec.reference.data.default_model); any other Hugging Face model folder works via its path.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

DTYPES = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16,
          "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16}


@dataclass
class LoadedModel:
    model: torch.nn.Module
    tokenizer: object
    path: Path

    @property
    def vocab_size(self) -> int:
        """Rows of the output layer (may include padding rows beyond the tokenizer's)."""
        return int(self.model.get_output_embeddings().weight.shape[0])


def resolve_device(device: str) -> torch.device:
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda requested but no CUDA device is available")
    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
        raise ValueError(f"unknown device {device!r}: use cpu or cuda")
    return torch.device(device)


def load_model(path: str | Path | None = None, device: str = "cpu", dtype: str = "float32") -> LoadedModel:
    """Load a causal LM and its tokenizer from a local folder (None = the default target)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if path is None:
        from specdec.reference.data.default_model import default_target_path
        path = default_target_path()
    path = Path(path)
    if not path.is_dir() or not (path / "config.json").is_file():
        raise FileNotFoundError(f"model path {str(path)!r} is not a Hugging Face model folder "
                                "(no config.json there)")
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}: choose one of {sorted(set(DTYPES))}")
    dev = resolve_device(device)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=DTYPES[dtype]).to(dev).eval()
    return LoadedModel(model, tokenizer, path)


def check_pair(target: LoadedModel, draft: LoadedModel) -> str | None:
    """Raise on a tokenizer mismatch; return a note when only padding rows differ.

    Speculative sampling needs p and q over the same token ids. Tokenizers must map the
    same strings to the same ids. Output layers may still differ in padding rows: the
    draft's logits are then cut or padded with -inf to the target's size (q puts no mass
    on the extra rows), which keeps sampling exact.
    """
    tv, dv = target.tokenizer.get_vocab(), draft.tokenizer.get_vocab()
    if tv != dv:
        only_t = len(set(tv.items()) - set(dv.items()))
        only_d = len(set(dv.items()) - set(tv.items()))
        raise ValueError(f"vocabulary mismatch between target {str(target.path)!r} and draft "
                         f"{str(draft.path)!r}: {only_t} token->id entries only in the target, "
                         f"{only_d} only in the draft")
    if target.vocab_size != draft.vocab_size:
        return (f"output layers differ only in padding rows (target {target.vocab_size}, draft "
                f"{draft.vocab_size}); draft logits are fitted to the target's {target.vocab_size}")
    return None
