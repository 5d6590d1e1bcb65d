"""KenLM n-gram drafters over a target's token ids (negligible-cost q, c ~ 0).

Modules: `tools` (run lmplz / build_binary), `corpus` (+ `rdata`: plain training text as
token ids, held-out prompts), `arpa` (read ARPA files), `tables` (vectorised back-off
tables, cached as .npz), `model` (q over the whole vocabulary; the one log10 -> probability
boundary), `build` (a model folder from a training text). Depends only on numpy, kenlm's
tools and a Hugging Face tokenizer: nothing from `reference`, `simulator` or `specdec`.
"""
