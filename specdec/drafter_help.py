"""Drafter spec help text, kept free of torch imports so --help stays fast."""
SPEC_HELP = "none | lookup[:N[:earliest]] (prompt lookup) | ngram:PATH (KenLM) | model:PATH (HF causal LM folder)"
