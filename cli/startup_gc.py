"""The cyclic garbage collector paused over a command's start-up: importing its modules and
parsing its options allocate some hundred thousand objects (classes, functions, typer's and
pydantic's option adapters), none of them garbage a cycle holds, yet the collector walked the
young ones a hundred times, a tenth of `servecap simulate`'s start-up CPU. It runs again, as
usual, from the moment the command's own code starts (or the command line is refused); what
start-up allocated joins the oldest generation unscanned, as after sim/gcpause.py's pause."""

import gc

_paused = False


def pause() -> None:
    """Stop the collector until resume(); a no-op where it is already off."""
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def resume() -> None:
    """Restart the collector pause() stopped; a no-op otherwise."""
    global _paused
    if _paused:
        _paused = False
        gc.freeze()
        gc.unfreeze()
        gc.enable()


def resumed_first(invoke):
    """A command's invoke that restarts the collector before the command runs."""
    def run(ctx):
        resume()
        return invoke(ctx)
    return run


def frozen_at_exit(run):
    """The process's entry point, with every object left when it returns moved out of the
    collector's reach (gc.freeze): the interpreter's exit then frees what module teardown
    releases, without collections that walk all of them again (0.07-0.09 of the 0.09-0.11
    CPU-s `servecap simulate` spent exiting). Cyclic garbage left at exit is not finalized,
    which Python never promises at exit; every file a command writes is closed by then."""
    def entry() -> None:
        try:
            run()
        finally:
            gc.freeze()
    return entry
