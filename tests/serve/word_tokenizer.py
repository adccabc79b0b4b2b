"""A tokenizer.json the tests write themselves: one token per word or punctuation mark, 256
ids (tiny-llama's vocabulary), so any id the random model generates decodes to a word."""

from pathlib import Path

from servecap.load.synth import WORDS

VOCAB_SIZE = 256


def write_word_tokenizer(folder: Path) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = ["[UNK]", ":", ".", ",", "?", "user", "assistant", "system", *WORDS]
    words += [f"w{i}" for i in range(VOCAB_SIZE - len(words))]
    assert len(set(words)) == VOCAB_SIZE
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    return folder
