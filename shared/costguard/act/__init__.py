"""Executors: carry a decision out. Dry-run differs from live only at the final API call."""


class UnsupportedAction(RuntimeError):
    """costguard has no safe way to do this to this kind of resource."""
