"""Read: the reports, their evidence files and the tolerant text matching the later stages use (data in,
nothing asked of a model).
"""
