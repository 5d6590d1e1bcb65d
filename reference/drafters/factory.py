"""Build a drafter from a command-line spec (the grammar and the registry of kinds:
`specdec.reference.drafters.spec`; each kind's module builds its own, `build_drafter`)."""
from __future__ import annotations

import importlib

from specdec.errors import SpecdecError
from specdec.reference.drafters.protocol import Drafter
from specdec.reference.model.models import LoadedModel
from specdec.reference.model.placement import DeviceMap
from specdec.reference.model.seq2seq import is_encoder_decoder
from specdec.reference.drafters.spec import DRAFTER_KINDS, DrafterSpec


def make_drafter(spec: str, target: LoadedModel, device: str = "cpu", dtype: str = "float32",
                 device_map: DeviceMap | None = None) -> tuple[Drafter, str | None]:
    """Return (drafter, note); note says e.g. how vocabularies were reconciled. The spec's kind
    names the module that builds it (`DRAFTER_KINDS`); a neural draft model (or LM rescorer)
    runs on the target's backend, on `device` or spread by `device_map`
    (specdec.reference.model.placement)."""
    s = DrafterSpec.parse(spec)
    check_kind(s, target.path, is_encoder_decoder(target.model))
    build = importlib.import_module(DRAFTER_KINDS[s.kind].module).build_drafter
    return build(s.arg, target, device=device, dtype=dtype, device_map=device_map)


def check_kind(s: DrafterSpec, target_path, seq2seq: bool | None = None) -> None:
    """Refuse, before the drafter loads, one the target's kind of model cannot use: a learned
    drafter (heads, feature draft) on an encoder-decoder target, or a draft model of the other
    kind (read from config.json; the target's too unless `seq2seq` says it)."""
    from pathlib import Path

    from specdec.reference.model.models import check_model_folder, model_class, pair_kinds_differ
    from specdec.reference.model.seq2seq import folder_is_encoder_decoder

    if seq2seq is None:
        seq2seq = folder_is_encoder_decoder(target_path)
    if seq2seq and DRAFTER_KINDS[s.kind].causal_only:
        raise SpecdecError(f"{s.kind} drafters are trained on causal targets; {str(target_path)!r} is an "
                           "encoder-decoder (use model:PATH, lookup or ngram:PATH)")
    if s.kind != "model" or not (Path(s.arg) / "config.json").is_file():
        return
    try:
        check_model_folder(s.arg)
    except FileNotFoundError as exc:
        raise SpecdecError(str(exc)) from None
    if folder_is_encoder_decoder(s.arg) != seq2seq:
        raise SpecdecError(pair_kinds_differ(target_path, s.arg, seq2seq))
    if seq2seq and model_class(Path(s.arg)) is not model_class(Path(target_path)):
        raise SpecdecError(f"the encoders of target {str(target_path)!r} and draft {s.arg!r} read different inputs "
                           "(text and features): a pair must share the encoder's input")


def require_output_layer(target: LoadedModel, who: str) -> None:
    """A one-line refusal when a drafter that reads the target's output layer meets a device map
    that offloads it."""
    if target.model.get_output_embeddings().weight.device.type == "meta":
        raise SpecdecError(f"{who} through the target's output layer, which this device map offloads: keep "
                           "lm_head on a GPU or the CPU (not 'disk', nor 'cpu' beside a GPU)")
