"""Write: the ledger, the rendered document, the claim diff and the methodology table.
"""
