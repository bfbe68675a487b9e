"""Adapters to AWS: the cached client factory and the calls costguard makes."""
