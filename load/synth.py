"""Prompts the run makes up: token ids of the requested length (seeded, shared within a prefix
group), or, with a tokenizer, seeded English words cut to a given token count."""

import random

from servecap.sim.sampling import Request

# Common English words: one token each in most tokenizers, so a cut lands near a word's end.
WORDS = tuple("""the of and to in is that for it as was with be by on not he this are or his
from at which but have an they you were her she there one all we their has been would will
more if no when what so out up about into them can only other new some time could these two
may first then do any like my now over such our man me even most made after also did many
before must through back years where much your way well down should because each just those
people how too little state good very make world still own see men work long get here between
both life being under never day same another know while last might us great old year off come
since against go came right used take three""".split())


def prompt_ids(req: Request, vocab_size: int, seed: int) -> list[int]:
    """The prefix group's ids (the same for every request of the group, so a prefix cache can
    serve them) then ids seeded by the request id: the same run gives the same prompts."""
    group = req.prefix_group if req.prefix_group is not None else ""
    prefix = _ids(f"{seed}:prefix:{group}", req.prefix_tokens, vocab_size)
    rest = _ids(f"{seed}:request:{req.request_id}", req.prompt_tokens - req.prefix_tokens,
                vocab_size)
    return prefix + rest


def stand_in_ids(key: str, count: int, vocab_size: int) -> list[int]:
    """Seeded ids standing in for an answer a completions server sent as text."""
    return _ids(f"answer:{key}", count, vocab_size)


def _ids(key: str, count: int, vocab_size: int) -> list[int]:
    return random.Random(key).choices(range(vocab_size), k=count) if count > 0 else []


def words_text(tokenizer, num_tokens: int, key: str) -> str:
    """Seeded words whose tokens (the tokenizer's specials aside) number num_tokens, or as
    near below as a token boundary allows; '' for num_tokens <= 0."""
    if num_tokens <= 0:
        return ""
    rng = random.Random(f"words:{key}")
    text = " ".join(rng.choices(WORDS, k=num_tokens + 8))
    while tokenizer.count(text) - tokenizer.count("") < num_tokens:  # words under one token
        text += " " + " ".join(rng.choices(WORDS, k=num_tokens))
    return tokenizer.cut(text, num_tokens)
