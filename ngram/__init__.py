"""KenLM n-gram models over a target's token ids (negligible-cost q, c ~ 0).

Modules: `tools` (run lmplz / build_binary), `arpa` (read ARPA files), `tables` (vectorised
back-off tables, cached as .npz), `model` (q over the whole vocabulary; the one log10 ->
probability boundary), `build` (a model folder from a training text of token ids). The
corpora live in `specdec.reference.data`. Depends on numpy and kenlm's tools only (and the
leaves `specdec.paths`, for the default tool folder and atomic writes, and `specdec.errors`).
The method: docs/ngram.md.
"""
