"""Prompts as token ids of the requested length: seeded, shared within a prefix group."""

import random

from servecap.sim.sampling import Request


def prompt_ids(req: Request, vocab_size: int, seed: int) -> list[int]:
    """The prefix group's ids (the same for every request of the group, so a prefix cache can
    serve them) then ids seeded by the request id: the same run gives the same prompts."""
    group = req.prefix_group if req.prefix_group is not None else ""
    prefix = _ids(f"{seed}:prefix:{group}", req.prefix_tokens, vocab_size)
    rest = _ids(f"{seed}:request:{req.request_id}", req.prompt_tokens - req.prefix_tokens,
                vocab_size)
    return prefix + rest


def _ids(key: str, count: int, vocab_size: int) -> list[int]:
    return random.Random(key).choices(range(vocab_size), k=count) if count > 0 else []
