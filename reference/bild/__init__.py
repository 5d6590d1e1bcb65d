"""Big Little Decoder: its policy as an acceptance rule of the one decode loop, quality
measures, the speed/quality sweep (docs/bild.md).
"""
