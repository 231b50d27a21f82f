"""MCP server tools as bide tools; untrusted by default."""
