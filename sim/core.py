"""Which simulator kernels run: each compiled one (servecap.sim._<name>_c, built by the
package's build from sim/<name>.py and its .pxd) when it was built from the very source
installed beside it, else that source as plain Python. Both give the same bytes
(tests/sim/test_golden_records.py runs each). The kernels: seq (a request's state, whose
fields the others read in C; sim/state.py picks it), kvpool (the block pool; sim/pool.py
picks it), engine (admission and a request's decode
bookkeeping, its fields read in C by the kernels), policies (which prompts join an
iteration), decode_run (decode-only steps between
events), loop (the scheduler loop that calls it) and draws (a workload's request list;
sim/sampling.py picks it)."""

from . import decode_run as PYTHON  # the decode kernel's source, run where COMPILED is None
from . import engine as _engine_python
from . import loop as _loop_python
from . import policies as _policies_python
from .pool import COMPILED_POOL
from .sampling import COMPILED_DRAWS
from .stamp import compiled, source_digest
from .state import COMPILED_SEQ

# setup.py builds the same list
KERNELS = ("seq", "kvpool", "engine", "policies", "decode_run", "loop", "draws")


def _compiled(name: str = "decode_run"):
    """stamp.compiled with this module's source_digest."""
    return compiled(name, lambda kernel: source_digest(kernel))


# the compiled engine takes requests as the compiled Seq, and the compiled kernels read the
# engine's and the requests' fields as C fields: each runs only with the compiled classes it
# reads (a stale or absent one runs them as Python too)
COMPILED_ENGINE = _compiled("engine") if COMPILED_SEQ is not None \
    and COMPILED_POOL is not None else None
COMPILED_POLICIES = _compiled("policies") if COMPILED_ENGINE is not None else None
COMPILED = _compiled("decode_run") if COMPILED_ENGINE is not None else None
COMPILED_LOOP = _compiled("loop") if COMPILED_ENGINE is not None else None
Engine = (COMPILED_ENGINE or _engine_python).Engine  # the engine a run builds
INTAKE = (COMPILED_ENGINE or _engine_python).INTAKE  # the API server's intake the engine reads
PLANNERS = (COMPILED_POLICIES or _policies_python).PLANNERS  # the loop's policies


def decode_run(eng, horizon, max_steps) -> int:
    """decode_run.decode_run, compiled where the build made it."""
    return (COMPILED or PYTHON).decode_run(eng, horizon, max_steps)


def run_iterations(eng, horizon) -> None:
    """loop.run_iterations, compiled where the build made it."""
    (COMPILED_LOOP or _loop_python).run_iterations(eng, horizon)


def kernel() -> str:
    """Which kernels run, for a benchmark to say."""
    built = [name for name, module in (("request state", COMPILED_SEQ),
                                       ("block pool", COMPILED_POOL),
                                       ("engine", COMPILED_ENGINE),
                                       ("policies", COMPILED_POLICIES), ("decode", COMPILED),
                                       ("loop", COMPILED_LOOP), ("draws", COMPILED_DRAWS))
             if module is not None]
    if len(built) == 7:
        return "compiled (Cython) request state, block pool, engine, policy, decode, loop " \
            "and draws kernels"
    if not built:
        return "pure Python kernels"
    return f"compiled (Cython) {' and '.join(built)}, the rest as Python"
