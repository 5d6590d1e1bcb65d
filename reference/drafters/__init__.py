"""Drafters: the protocol, the torch-free spec grammar, prompt lookup, KenLM n-gram and neural
drafters.
"""
