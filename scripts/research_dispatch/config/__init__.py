"""The input, read once and checked: the settings schema, topic files, lineage, the plan of legs, the
environment (docs/ARCHITECTURE.md)."""
