"""The researcher's tools: web search and extraction (Tavily, Exa) and MCP servers, with the leg's one
source registry (docs/ARCHITECTURE.md)."""
