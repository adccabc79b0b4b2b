"""A bundled model YAML read as it stands: servecap ships it and its tests validate it, so a
plan or a simulation reads its mapping without model_configs/schema.py's pydantic models,
whose import is a fifth of `servecap simulate`'s start-up. Any other file is validated."""


class AsRead:
    """A mapping read through attributes as schema.py's ModelFile (or Serving) reads: the
    value a key gives, None for a field left out, the default of every field those models
    have but ModelFile's name and source, which every bundled file gives.
    tests/model_configs/test_loading.py checks each bundled file, field by field, against
    what ModelFile's validator builds from it."""

    __slots__ = ("_given",)

    def __init__(self, given: dict) -> None:
        self._given = given

    def __getattr__(self, name: str):
        if name.startswith("_"):  # no field's name; the slot unset while unpickling
            raise AttributeError(name)
        return self._given.get(name)

    def __eq__(self, other: object) -> bool:
        return type(other) is AsRead and self._given == other._given

    __hash__ = None

    def __getstate__(self) -> dict:
        return self._given

    def __setstate__(self, given: dict) -> None:
        self._given = given

    def __repr__(self) -> str:
        return f"AsRead({self._given!r})"
