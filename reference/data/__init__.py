"""Data: default paths are in specdec.paths; here the corpora, held-out prompts, the target-
aligned corpus and the default target model.
"""
