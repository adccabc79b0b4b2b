"""The optional extras: a command that needs one says so in one line, naming what to install
(exit 2), instead of a ModuleNotFoundError traceback on the base install."""

import importlib

from .errors import fail

# module -> the extra of pyproject.toml that installs it
RUNTIME = {"torch": "runtime"}
SERVER = {"fastapi": "serve", "uvicorn": "serve"}
CLIENT = {"aiohttp": "serve"}
EXCEL = {"openpyxl": "excel"}


def need(what: str, modules: dict[str, str]) -> None:
    """Import each module; any missing gives 'WHAT needs a, b: pip install 'servecap[x,y]''."""
    missing = {}
    for module, extra in modules.items():
        try:
            importlib.import_module(module)
        except ImportError:
            missing[module] = extra
    if missing:
        extras = ",".join(dict.fromkeys(missing.values()))
        raise fail(f"{what} needs {', '.join(missing)}: pip install 'servecap[{extras}]'")
