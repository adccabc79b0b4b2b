"""The cyclic garbage collector paused while a run builds its objects: a 100,000-request run
allocates a few million objects (each request's state, timelines, records) and none of them
form a cycle the run needs collected, yet every 700 allocations the collector walks the young
ones and, as they pile up, the whole heap: a tenth of `servecap simulate`'s CPU. Reference
counting still frees everything as usual. When the outermost pause ends, what it allocated
joins the oldest generation unscanned (gc.freeze then gc.unfreeze), so the collector's first
pass afterwards does not walk it all at once; a full collection still finds any cycle in it."""

import gc
from contextlib import contextmanager


@contextmanager
def paused():
    """Run the block with the cyclic collector off; nested pauses leave it to the outermost."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.freeze()
            gc.unfreeze()
            gc.enable()
