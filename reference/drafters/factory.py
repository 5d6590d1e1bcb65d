"""Build a drafter from a command-line spec (the grammar: `specdec.reference.drafters.spec`)."""
from __future__ import annotations

from specdec.errors import SpecdecError
from specdec.reference.drafters.protocol import Drafter, NoDrafter
from specdec.reference.core.models import LoadedModel, check_pair, load_model
from specdec.reference.core.placement import DeviceMap
from specdec.reference.core.seq2seq import is_encoder_decoder

from specdec.reference.drafters.spec import DrafterSpec, lookup_args


def make_drafter(spec: str, target: LoadedModel, device: str = "cpu", dtype: str = "float32",
                 device_map: DeviceMap | None = None) -> tuple[Drafter, str | None]:
    """Return (drafter, note); note says e.g. how vocabularies were reconciled. "none" is the
    NoDrafter; a neural draft model (or LM rescorer) runs on the target's backend, on `device`
    or spread by `device_map` (specdec.reference.core.placement)."""
    s = DrafterSpec.parse(spec)
    check_kind(s, target.path, is_encoder_decoder(target.model))
    if s.kind == "none":
        return NoDrafter(), None
    if s.kind == "lookup":
        from specdec.reference.drafters.prompt_lookup import PromptLookupDrafter
        n, match = lookup_args(s.arg)
        return PromptLookupDrafter(max_ngram=n, match=match), None
    if s.kind == "ngram":
        from specdec.reference.drafters.ngram import NgramDrafter
        return NgramDrafter(s.arg, vocab_size=target.vocab_size), None
    if s.kind == "heads":
        from specdec.reference.drafters.heads import HeadsDrafter
        from specdec.reference.drafters.spec import heads_args
        from specdec.reference.heads.store import load_heads
        path, options = heads_args(s.arg)
        require_output_layer(target, "heads draft")
        heads, _ = load_heads(path, target.model, target.path)
        if target.backend == "fast":
            from specdec.reference.core.backend import use_backend
            use_backend(heads, "fast")
        note = f"{heads.n_heads} heads over {heads.vocab.numel()} ids (drafts at most {heads.n_heads} tokens)"
        if not options:
            return HeadsDrafter(heads, target.vocab_size), note
        from specdec.reference.drafters.lattice import LatticeDrafter
        rescorer, what = None, ""
        if "ngram" in options:
            from specdec.ngram.model import NgramModel
            rescorer, what = NgramModel.load(options["ngram"], target.vocab_size), "n-gram"
        elif "lm" in options:
            from specdec.reference.heads.lm_rescorer import LMRescorer
            lm = load_model(options["lm"], device=device, dtype=dtype, backend=target.backend, device_map=device_map)
            note += "; " + (check_pair(target, lm) or "rescorer vocabulary matches")
            rescorer, what = LMRescorer(lm.model, target.vocab_size), "LM"
        local = options.get("rescore") == "local"
        k, p, w = options.get("k", 4), options.get("p", 1), options.get("w", 1.0 if rescorer is not None else 0.0)
        how = (f"the path of the top-{k} lattice chosen left to right (local rescoring)" if local
               else f"the {p} best paths of the top-{k} lattice")
        return LatticeDrafter(heads, target.vocab_size, k, p, rescorer, w, local), (
            note + f"; {how}" + (f", {what} weight {w:g}" if rescorer is not None else ""))
    if s.kind == "eagle":
        from specdec.reference.drafters.eagle import EagleDrafter
        from specdec.reference.drafters.spec import eagle_args
        from specdec.reference.eagle.store import load_eagle
        path, tree, weights = eagle_args(s.arg)
        require_output_layer(target, "the feature draft drafts")
        draft, _ = load_eagle(path, target.model, target.path)
        note = f"feature draft, {draft.depth_text(draft.depth)} ({draft.shape.hidden} wide) over {draft.vocab.numel()} ids"
        if weights == "bf16" or (weights == "auto" and target.backend == "fast"):
            draft.packed_bf16()
            note += ", matrices in bfloat16 panels"
        if tree is not None:
            note += f"; dynamic trees of {tree[1]} nodes, top-{tree[0]} per depth"
        return EagleDrafter(draft, target.vocab_size, tree), note
    from specdec.reference.drafters.neural import NeuralDrafter
    draft = load_model(s.arg, device=device, dtype=dtype, backend=target.backend, device_map=device_map)
    note = check_pair(target, draft)
    return NeuralDrafter(draft.model, vocab_size=target.vocab_size), note


def check_kind(s: DrafterSpec, target_path, seq2seq: bool | None = None) -> None:
    """Refuse, before the drafter loads, one the target's kind of model cannot use: a learned
    drafter (heads, feature draft) on an encoder-decoder target, or a draft model of the other
    kind (read from config.json; the target's too unless `seq2seq` says it)."""
    from pathlib import Path

    from specdec.reference.core.models import check_model_folder, model_class, pair_kinds_differ
    from specdec.reference.core.seq2seq import folder_is_encoder_decoder

    if seq2seq is None:
        seq2seq = folder_is_encoder_decoder(target_path)
    if seq2seq and s.kind in ("heads", "eagle"):
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
