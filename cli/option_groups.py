"""Option groups defined once: a frozen dataclass whose fields carry typer's annotations
(each in its help panel) becomes a command's options, and the command receives one value."""

import functools
import inspect
from dataclasses import fields


def options_from(cls, into: str, after: str | None = None):
    """Add `cls`'s fields to the decorated command's signature as keyword options (after the
    parameter `after`, else at the end: --help lists them, and their panels, in that order);
    the command receives them as one `cls` value in its parameter `into`."""
    names = [f.name for f in fields(cls)]
    hints = inspect.get_annotations(cls)

    def decorate(command):
        @functools.wraps(command)
        def wrapper(*args, **kwargs):
            group = cls(**{name: kwargs.pop(name) for name in names})
            return command(*args, **{into: group}, **kwargs)

        own = [p for p in inspect.signature(command).parameters.values() if p.name != into]
        extra = [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default,
                                   annotation=hints[f.name]) for f in fields(cls)]
        cut = next((i + 1 for i, p in enumerate(own) if p.name == after), len(own))
        rest = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own[cut:]]
        wrapper.__signature__ = inspect.Signature(own[:cut] + extra + rest)
        del wrapper.__wrapped__
        wrapper.command = command  # the function as written (its own parameters)
        return wrapper

    return decorate
