"""Backtest: what costguard would have caught, stopped and saved over a past period."""
