"""Adapters of parlance to the servers and libraries its users run, each a thin layer over the public
API: `parlance.integrations.transformers` (a `LogitsProcessor` for `model.generate`)."""
