# The C types of sim/draws.py's loops, for the compiled kernel (Cython's augmenting .pxd: the
# .py stays plain Python). math is libm here (`math.log`, `math.exp`, `math.floor` are the C
# functions on C doubles: the same log and exp math.log and math.exp call); the generator's
# draws stay Python calls to its bound methods, in the same order. Lengths and their bounds
# are 64-bit integers, within 2^53 (sim/sampling.py sends the rest to the library's own
# methods), so each is exact as a double too; times are doubles, as Python's floats.
import cython
from cpython.object cimport PyObject, PyTypeObject, Py_TYPE
from libc cimport math

cdef double NV_MAGICCONST, INF

cdef inline object _new(object cls):
    """object.__new__(cls): its type's own allocation, no __init__."""
    cdef tuple no_args = ()
    return (<PyTypeObject*>cls).tp_new(cls, <PyObject*>no_args, NULL)


cdef inline int _put(object slot, object obj, object value) except -1:
    """slot.__set__(obj, value): a slot's C setter, not a Python call."""
    if Py_TYPE(slot).tp_descr_set is NULL:
        raise AttributeError(f"{type(slot).__name__!r} object has no attribute '__set__'")
    return Py_TYPE(slot).tp_descr_set(slot, obj, value)


@cython.locals(now=cython.double, _=cython.Py_ssize_t)
cpdef list poisson(object rng, double rate, Py_ssize_t count)

@cython.locals(now=cython.double, _=cython.Py_ssize_t)
cpdef list gamma(object rng, object shape, object scale, Py_ssize_t count)

@cython.locals(u1=cython.double, u2=cython.double, z=cython.double, a=cython.double,
               x=cython.double, n=cython.double, rest=cython.double,
               length=cython.longlong, _=cython.Py_ssize_t)
cpdef list lognormal(object rng, double mu, double sigma, Py_ssize_t count, long long low,
                     long long high)

@cython.locals(width=cython.longlong, r=cython.longlong, n=cython.longlong,
               _=cython.Py_ssize_t)
cpdef list uniform(object rng, long long first, long long last, Py_ssize_t count,
                   long long low, long long high)

@cython.locals(u=cython.double, j=cython.Py_ssize_t, last=cython.Py_ssize_t, picks=tuple,
               _=cython.Py_ssize_t)
cpdef list shares(object rng, tuple items, tuple edges, Py_ssize_t count)

@cython.locals(count=cython.Py_ssize_t, i=cython.Py_ssize_t)
cpdef list requests(type cls, tuple slots, object times, object prompts, object outputs,
                    object groups, object tenants)

@cython.locals(i=cython.Py_ssize_t, out=list)
cdef list _requests_compiled(type cls, tuple slots, object times, object prompts,
                             object outputs, object groups, object tenants)
