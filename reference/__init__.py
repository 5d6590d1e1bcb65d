"""The exact reference decoder and everything measured with it (docs/decoder.md)."""
