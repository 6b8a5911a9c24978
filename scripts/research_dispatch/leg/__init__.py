"""One leg end to end: the research loop, the report, its files and status, where the leg stands, resume,
verify (docs/ARCHITECTURE.md). Knows nothing of synthesis or publishing."""
