# The compiled scheduler loop (sim/loop.py): Cython's augmenting .pxd, the .py stays plain
# Python. Its locals stay Python objects (token counts add as Python integers, times as
# doubles, exactly as the interpreter does); the gain is the interpreter's dispatch.
