"""What every synthesis sub-stage shares: its typed errors, the structured-output call, the vocabulary of
checked claims and the deterministic text keys. Imports nothing of the synthesis.
"""
