"""costguard: an event-driven GPU cost monitor and auto-remediator for AWS."""

__version__ = "0.1.0"
