"""`python -m research_dispatch.fake serve` (FIXED in docs/ARCHITECTURE.md): the fakes' entry point.

The fakes themselves live in their own package, `research_dispatch_fakes` (same wheel), so that
nothing of the product's parsing or logic reaches them; this module only keeps the documented command.
"""
