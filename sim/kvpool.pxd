# The block pool as a C struct (sim/kvpool.py compiled as servecap.sim._kvpool_c): the engine
# and the decode kernel (engine.pxd, decode_run.pxd) read and write its free count in C and
# call its allocation and prefix references as C methods. Block counts are 64-bit integers.
import cython


cdef class BlockPool:
    cdef public long long num_blocks, free, watermark_blocks, evictable_blocks, peak_used
    cdef public dict refs, group_blocks
    cdef public object evictable

    cpdef long long available(self, object reviving=*) except? -1
    @cython.locals(used=cython.longlong)
    cpdef bint allocate(self, long long num_blocks, long long keep=*) except -1
    cpdef bint evict_one(self) except -1
    cpdef release(self, long long num_blocks)
    cpdef bint is_cached(self, object group) except -1
    cpdef acquire_prefix(self, object group, long long num_blocks)
    cpdef release_prefix(self, object group)
