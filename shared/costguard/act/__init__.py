"""Executors: carry a decision out. Dry-run differs from live only at the final API call."""
