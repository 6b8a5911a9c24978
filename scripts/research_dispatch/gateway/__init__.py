"""The model gateway: the one OpenAI-compatible client with a typed `CallRecord` per call, the endpoints
listing, route verdicts (docs/ARCHITECTURE.md)."""
