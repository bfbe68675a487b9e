"""The right-sizing audit: what runs, what it should run on, and what that would save per month."""
