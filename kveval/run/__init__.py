"""Sending: orchestration, the client, the endpoint, the embedded engine, task specs and data."""
