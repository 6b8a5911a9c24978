"""A newcomer's first commands: `init` (with its templates) and `demo` (with the bundled reference review)
(docs/ARCHITECTURE.md)."""
