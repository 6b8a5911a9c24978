"""Check: each citation of an anchored claim checked against the stored passage by a judge of another
family, decided by code.
"""
