"""Measuring: the one comparison harness (a method against the baseline, interleaved), the one
definition of a measured speedup, the bootstrap intervals, and the check for other processes
competing for the CPU while something is timed."""
