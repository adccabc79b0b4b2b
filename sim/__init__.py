"""Discrete-event simulation of an inference scheduler over a paged KV pool (stdlib only)."""
