"""Adapters that bring tools from outside (MCP servers) into bide."""
