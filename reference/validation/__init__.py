"""Predicted vs measured speedup: configuration, decode runs, predictions, typed rows, report
(docs/validation.md).
"""
