"""research-dispatch: one researcher per (topic, model), cited reports with route provenance,
a cross-family synthesis, and one pull request for human review."""

__version__ = "0.1.0"
