"""Loading Hugging Face language models (causal, or encoder-decoder: T5, BART/Marian, Whisper)
from local folders, and checking a target/draft pair.

Everything is local: the default target is the cached SmolLM2-135M-Instruct (see
specdec.reference.data.default_model); any other Hugging Face model folder works via its path,
and a GGUF file via its converted folder (specdec.reference.model.gguf).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import torch

from specdec.errors import SpecdecError
from specdec.reference.model.gguf import model_folder
from specdec.reference.model.model_files import check_model_folder, context_limit  # noqa: F401 (re-exported)
from specdec.reference.model.placement import DeviceMap

DTYPES = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16,
          "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16}


@dataclass
class LoadedModel:
    model: torch.nn.Module
    tokenizer: object
    path: Path
    backend: str = "eager"  # how the matrix products run (specdec.reference.model.backend)
    backend_seconds: float = 0.0  # switching to it: building or loading the kernel, packing the weights

    @property
    def vocab_size(self) -> int:
        """Rows of the output layer (may include padding rows beyond the tokenizer's)."""
        return int(self.model.get_output_embeddings().weight.shape[0])


def resolve_device(device: str) -> torch.device:
    if device == "cuda" and not torch.cuda.is_available():
        raise SpecdecError("--device cuda requested but no CUDA device is available")
    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
        raise SpecdecError(f"unknown device {device!r}: use cpu or cuda")
    return torch.device(device)


def load_model(path: str | Path | None = None, device: str = "cpu", dtype: str = "float32",
               backend: str = "eager", device_map: DeviceMap | None = None) -> LoadedModel:
    """Load a causal LM and its tokenizer from a local folder or a .gguf file (converted once:
    specdec.reference.model.gguf; None = the default target) in `dtype`, running on `backend`
    ("eager", "fast" or "auto": specdec.reference.model.backend), on `device` or, given a
    `device_map` (specdec.reference.model.placement), spread over the devices it names (then always
    eager: the fast kernel is for one CPU).

    Raises ValueError / FileNotFoundError with one line naming the folder or file when the
    folder is incomplete or a file is corrupt.
    """
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    from specdec.reference.model.allocator import keep_large_blocks

    if path is None:
        from specdec.reference.data.default_model import default_target_path
        path = default_target_path()
    path = check_model_folder(model_folder(path))
    auto = model_class(path)
    if dtype not in DTYPES:
        raise SpecdecError(f"unknown dtype {dtype!r}: choose one of {sorted(set(DTYPES))}")
    dev = resolve_device(device)
    keep_large_blocks()  # batched passes over long contexts reuse their big temporaries (allocator.py)
    hf_logging.disable_progress_bar()  # no "Loading weights" bar: commands print their own progress
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
    except Exception as exc:  # transformers raises many types for a broken tokenizer
        raise SpecdecError(f"cannot load the tokenizer in {str(path)!r}: {_first_line(exc)}") from exc
    if device_map is not None:
        if backend == "fast":
            raise SpecdecError("the fast backend runs on one CPU; a device map runs eager")
        from specdec.reference.model.placement import check_device_map
        check_device_map(device_map, path)
        backend = "eager"
    try:
        if device_map is None:
            model, info = auto.from_pretrained(path, dtype=DTYPES[dtype], output_loading_info=True)
            model = model.to(dev).eval()
        else:
            model, info = auto.from_pretrained(path, dtype=DTYPES[dtype], device_map=device_map,
                                               offload_folder=_offload_folder(device_map), output_loading_info=True)
            model = model.eval()
    except Exception as exc:  # OSError, SafetensorError, RuntimeError (shape mismatch) ...
        raise SpecdecError(f"cannot load the weights in {str(path)!r}: {_first_line(exc)}") from exc
    missing = sorted(info.get("missing_keys") or ())
    if missing:  # transformers would initialise them at random and decode garbage without a word
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        raise SpecdecError(f"{str(path)!r}: its weights lack {len(missing)} parameters of its "
                           f"{model.config.model_type} architecture ({', '.join(missing[:3])}{more}); they would be "
                           "random")
    from specdec.reference.model.backend import use_backend
    start = time.perf_counter()
    backend = use_backend(model, backend)
    return LoadedModel(model, tokenizer, path, backend, time.perf_counter() - start)


def model_class(path: Path):
    """The transformers Auto class for the folder: causal LM, or (config.json's is_encoder_decoder)
    text-to-text (T5, BART, Marian) or speech-to-text (Whisper) encoder-decoder."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoModelForSpeechSeq2Seq

    from specdec.reference.model.seq2seq import folder_is_encoder_decoder

    if not folder_is_encoder_decoder(path):
        return AutoModelForCausalLM
    try:
        config = AutoConfig.from_pretrained(path)
    except Exception as exc:  # an unknown model_type, a malformed config
        raise SpecdecError(f"cannot read the config in {str(path)!r}: {_first_line(exc)}") from exc
    for auto in (AutoModelForSeq2SeqLM, AutoModelForSpeechSeq2Seq):
        if type(config) in auto._model_mapping:
            return auto
    raise SpecdecError(f"{str(path)!r}: {config.model_type} is an encoder-decoder that is neither text-to-text "
                       "nor speech-to-text (AutoModelForSeq2SeqLM / AutoModelForSpeechSeq2Seq)")


def _offload_folder(device_map) -> str | None:
    """A scratch folder for weights a map sends to "disk", removed when the process ends."""
    if not isinstance(device_map, dict) or "disk" not in device_map.values():
        return None
    import atexit
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="specdec-offload-")
    atexit.register(shutil.rmtree, folder, True)
    return folder


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return f"{type(exc).__name__}: {text.splitlines()[0]}"


def check_pair(target: LoadedModel, draft: LoadedModel) -> str | None:
    """Raise on a tokenizer mismatch; return a note when only padding rows differ.

    Speculative sampling needs p and q over the same token ids. Tokenizers must map the
    same strings to the same ids. Output layers may still differ in padding rows: the
    draft's logits are then cut or padded with -inf to the target's size (q puts no mass
    on the extra rows), which keeps sampling exact.
    """
    from specdec.reference.model.seq2seq import is_encoder_decoder

    if is_encoder_decoder(target.model) != is_encoder_decoder(draft.model):
        raise SpecdecError(pair_kinds_differ(target.path, draft.path, is_encoder_decoder(target.model)))
    tv, dv = target.tokenizer.get_vocab(), draft.tokenizer.get_vocab()
    if tv != dv:
        only_t = len(set(tv.items()) - set(dv.items()))
        only_d = len(set(dv.items()) - set(tv.items()))
        raise SpecdecError(f"vocabulary mismatch between target {str(target.path)!r} and draft "
                         f"{str(draft.path)!r}: {only_t} token->id entries only in the target, "
                         f"{only_d} only in the draft")
    if target.vocab_size != draft.vocab_size:
        return (f"output layers differ only in padding rows (target {target.vocab_size}, draft "
                f"{draft.vocab_size}); draft logits are fitted to the target's {target.vocab_size}")
    return None


def pair_kinds_differ(target: str | Path, draft: str | Path, target_is_encoder_decoder: bool) -> str:
    kinds = ("a causal LM", "an encoder-decoder")
    return (f"target {str(target)!r} is {kinds[target_is_encoder_decoder]} but draft {str(draft)!r} is "
            f"{kinds[not target_is_encoder_decoder]}: both must be the same kind")


def flops_per_token(model: torch.nn.Module) -> float:
    """2 x (parameters used as matrices per token): everything but input embeddings, plus the
    output layer (counted once even when tied to the input embedding)."""
    embeddings = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Embedding)}
    matrix = sum(p.numel() for p in model.parameters() if id(p) not in embeddings)
    head = model.get_output_embeddings()
    if head is not None and id(head.weight) in embeddings:
        matrix += head.weight.numel()
    return 2.0 * matrix
