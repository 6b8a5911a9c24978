"""What every stage uses: typed errors, atomic files, strict reading, records, redaction, sanitising, call
bounds, interrupts, the repository lock (docs/ARCHITECTURE.md). Imports nothing of the other stages."""
