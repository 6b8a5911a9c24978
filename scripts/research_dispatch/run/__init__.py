"""The local refresh (`run`): the order of work, the leg pool, the console summaries, progress, preload,
and `collect` between CI jobs (docs/ARCHITECTURE.md)."""
