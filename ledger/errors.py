"""The one error type the ledger raises: bad input, named by field, value and what is allowed."""

import reprlib

_SHORT = reprlib.Repr()
_SHORT.maxstring = _SHORT.maxother = 100
_SHORT.maxlist = _SHORT.maxdict = _SHORT.maxtuple = 8
_SHORT.maxlevel = 3


class _Said:
    """A value an error line names in words, unquoted ('empty', 'a list')."""

    def __init__(self, words: str) -> None:
        self.words = words

    def __repr__(self) -> str:
        return self.words


def document_kind(data: object) -> object:
    """What a parsed file holds where a mapping was wanted, in words for an error line:
    'empty', 'a list', 'a number (42)', never Python's type name ('NoneType')."""
    if data is None:
        return _Said("empty")
    if isinstance(data, bool):
        return _Said(f"true/false ({str(data).lower()})")
    for kinds, word in (((list, tuple), "a list"), ((int, float), "a number"),
                        ((str,), "a string")):
        if isinstance(data, kinds):
            return _Said(word if word == "a list" else f"{word} ({_SHORT.repr(data)})")
    return _Said(f"a {type(data).__name__}")


def shown(value: object) -> str:
    """The value as an error line shows it: at most ~100 characters, however large it is."""
    try:
        return _SHORT.repr(value)
    except ValueError:  # an int past Python's digit limit cannot even be printed
        return f"<an integer of about {value.bit_length():,} bits>"


class SpecError(ValueError):
    """Input that cannot be planned. Carries where it came from so the CLI prints one clear line."""

    def __init__(self, field: str, value: object, allowed: str, source: str = "") -> None:
        self.field = field
        self.value = value
        self.allowed = allowed
        self.source = source
        super().__init__(self.line())

    def line(self) -> str:
        where = f"{self.source}: " if self.source else ""
        if self.value is None:  # nothing was given: "--device = None" would read as a value
            return f"{where}{self.field} is missing: {self.allowed}"
        return f"{where}{self.field} = {shown(self.value)}: {self.allowed}"

    def at(self, source: str) -> "SpecError":
        """The same error, naming the file it came from."""
        return SpecError(self.field, self.value, self.allowed, source)
