"""Serving: a task's composed environment over MCP, and every service as MCP tool JSON.

- ``mcp_server``: a task's environment served with the official ``mcp`` SDK.
- ``mcp_export``: every service as MCP ``tools/list`` JSON and as spec-corpus lines.
"""
