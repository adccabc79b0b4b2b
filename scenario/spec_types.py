"""The scenario file's scalar types: strict (a string is never a number, a bool never a
count) and ranged (scenario/file.py validates with them; scenario/spec.py and spec_runs.py name
them in annotations kept as text, so that a command that reads no scenario file never imports
pydantic)."""

from typing import Annotated

from pydantic import BeforeValidator, Field, StrictFloat, StrictInt, StrictStr


def _real(value):
    """A whole number is a float too (rate: 8); a bool or a string is not."""
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


Real = Annotated[StrictFloat, BeforeValidator(_real)]
Count = Annotated[StrictInt, Field(ge=1)]
Zero = Annotated[StrictInt, Field(ge=0)]
Fraction = Annotated[Real, Field(gt=0, le=1)]
Text = Annotated[StrictStr, Field(min_length=1, max_length=4096)]
Size = Text | Zero  # '40GiB', '10%' where a share is allowed, or a byte count
