"""Typed event payloads, one module per source."""
