"""Build a drafter from a command-line spec (the grammar: `specdec.reference.drafters.spec`)."""
from __future__ import annotations

from specdec.reference.drafters.protocol import Drafter, NoDrafter
from specdec.reference.core.models import LoadedModel, check_pair, load_model

from specdec.reference.drafters.spec import DrafterSpec, lookup_args


def make_drafter(spec: str, target: LoadedModel, device: str = "cpu", dtype: str = "float32"
                 ) -> tuple[Drafter, str | None]:
    """Return (drafter, note); note says e.g. how vocabularies were reconciled. "none" is the
    NoDrafter; a neural draft model runs on the target's backend."""
    s = DrafterSpec.parse(spec)
    if s.kind == "none":
        return NoDrafter(), None
    if s.kind == "lookup":
        from specdec.reference.drafters.prompt_lookup import PromptLookupDrafter
        n, match = lookup_args(s.arg)
        return PromptLookupDrafter(max_ngram=n, match=match), None
    if s.kind == "ngram":
        from specdec.reference.drafters.ngram import NgramDrafter
        return NgramDrafter(s.arg, vocab_size=target.vocab_size), None
    from specdec.reference.drafters.neural import NeuralDrafter
    draft = load_model(s.arg, device=device, dtype=dtype, backend=target.backend)
    note = check_pair(target, draft)
    return NeuralDrafter(draft.model, vocab_size=target.vocab_size), note
