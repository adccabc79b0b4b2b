"""The servecap command line: parse, call one function, render, map errors to exit codes."""

import os

# numpy starts one OpenBLAS worker per core when it is imported, and the simulator's numpy
# work is vector operations (no matrix products), so those workers only wait, polling,
# CPU time spent beside the one thread that works (0.03-0.05 s a simulate on a 2-core
# machine). One thread unless the user set their own.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
