"""Count: what counts and for which side, the classes (convergent, divergent, single-source) and the
decisions, all decided by code.
"""
