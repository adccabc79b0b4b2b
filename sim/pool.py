"""The block pool a run builds: the compiled class (servecap.sim._kvpool_c, whose free count
and methods the compiled engine and decode kernel use in C) where the build made it from
sim/kvpool.py as it is, else that source as Python; the same blocks either way."""

from . import kvpool as _kvpool_python
from .stamp import compiled

COMPILED_POOL = compiled("kvpool")
BlockPool = (COMPILED_POOL or _kvpool_python).BlockPool
