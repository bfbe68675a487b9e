"""Slack interactivity: buttons and menus in costguard's messages, verified, authorized and carried out."""
