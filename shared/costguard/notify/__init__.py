"""Slack notification: the message, its routing, repeat suppression and delivery."""
