"""Align: the same decision and pick linked across reports by a judge, keyed by code.
"""
