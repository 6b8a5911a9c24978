"""Extract: claims asked of a model per report, and each claim located in its report (anchored).
"""
