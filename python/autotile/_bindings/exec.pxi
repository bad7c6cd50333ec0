# Bindings of csrc/exec (execution graph + memory plan) and csrc/runtime (host MultiFetch).
from libcpp.memory cimport unique_ptr
from libcpp.utility cimport move
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_C_CONTIGUOUS, PyBUF_FORMAT, PyBUF_WRITABLE
from libc.string cimport strcmp

cdef extern from "exec/box.h" namespace "autotile":
    cdef cppclass CInterval "autotile::Interval":
        int64_t lo
        int64_t hi
    cdef cppclass CDims "autotile::Dims":
        size_t size()
        CInterval& operator[](size_t)
    cdef cppclass CBox "autotile::Box":
        CDims dims

cdef extern from "exec/exec_graph.h" namespace "autotile":
    cdef cppclass CPlanSpec "autotile::PlanSpec":
        vector[int] factors
        vector[vector[string]] tensor_tilings
        vector[vector[string]] node_strategies
    cdef cppclass CExecOptions "autotile::ExecOptions":
        cbool control_deps
        int64_t swap_budget
        int stage_above
        int64_t hierarchical_above
        vector[int] cut_levels
        vector[int] order
        int64_t swap_hold
        cbool arena_only
        int64_t arena_limit
        cbool device_classes
    cdef cppclass CBuffer "autotile::Buffer":
        int device
        TensorId tensor
        CBox box
        uint8_t role "role"
        cbool partial
        int producer
        vector[int] readers
        int64_t bytes
        int64_t offset
        int64_t live_begin
        int64_t live_end
        cbool host
    cdef cppclass CPiece "autotile::Piece":
        int src
        CBox region
    cdef cppclass CExecOp "autotile::ExecOp":
        int device
        NodeId node
        vector[int] inputs
        vector[int] outputs
        vector[CPiece] pieces
        vector[CBox] input_boxes
        cbool accumulate
        vector[int] deps
        int64_t bytes_moved
        int64_t time
    cdef cppclass CExecGraph "autotile::ExecGraph":
        int devices
        vector[int] factors
        vector[CBuffer] buffers
        vector[CExecOp] ops
        vector[vector[int]] schedule
        vector[vector[int]] copy_schedule
        vector[int64_t] host_bytes
        vector[int64_t] arena_bytes
        vector[int64_t] live_peak_bytes
        vector[int] class_of
        int64_t bytes_moved
        vector[int64_t] bytes_received
        vector[int] tile_of
        int tile(TensorId, int)
    CExecGraph c_build_exec_graph "autotile::build_exec_graph"(const CGraph&, const CPlanSpec&, const CExecOptions&) except + nogil

cdef extern from "exec/schedule_order.h" namespace "autotile":
    vector[int] c_schedule_order "autotile::schedule_order"(const CGraph&) except +

cdef extern from *:
    """
    static inline int autotile_op_kind(const autotile::ExecOp& op) { return static_cast<int>(op.kind); }
    static inline int autotile_buffer_role(const autotile::Buffer& b) { return static_cast<int>(b.role); }
    """
    int autotile_op_kind(const CExecOp&)
    int autotile_buffer_role(const CBuffer&)

cdef extern from "runtime/multifetch.h" namespace "autotile":
    cdef cppclass CFetchSource "autotile::FetchSource":
        const void* data
        vector[int64_t] buf_lo
        vector[int64_t] buf_shape
        vector[int64_t] lo
        vector[int64_t] hi
    cdef enum class FetchDType "autotile::FetchDType":
        kFloat32 "autotile::FetchDType::kFloat32"
        kFloat64 "autotile::FetchDType::kFloat64"
        kBytes "autotile::FetchDType::kBytes"
        kInt32 "autotile::FetchDType::kInt32"
        kInt64 "autotile::FetchDType::kInt64"
        kBool "autotile::FetchDType::kBool"
        kFloat16 "autotile::FetchDType::kFloat16"
        kBFloat16 "autotile::FetchDType::kBFloat16"
    void c_multifetch "autotile::multifetch"(void*, const vector[int64_t]&, const vector[int64_t]&, int, FetchDType,
                                              const vector[CFetchSource]&, cbool) except + nogil


cdef tuple _box_lo(const CBox& b):
    cdef size_t i
    return tuple([b.dims[i].lo for i in range(b.dims.size())])


cdef tuple _box_hi(const CBox& b):
    cdef size_t i
    return tuple([b.dims[i].hi for i in range(b.dims.size())])


_ROLE = ("tile", "raw", "region")
_KIND = ("compute", "fetch", "swap_out", "swap_in")


cdef class ExecGraph:
    """The per-device execution graph with its memory plan (csrc/exec/exec_graph.h)."""
    cdef CExecGraph eg

    @property
    def devices(self):
        return self.eg.devices

    @property
    def factors(self):
        return list(self.eg.factors)

    @property
    def num_ops(self):
        return self.eg.ops.size()

    @property
    def num_buffers(self):
        return self.eg.buffers.size()

    @property
    def bytes_moved(self):
        return self.eg.bytes_moved

    @property
    def bytes_received(self):
        return list(self.eg.bytes_received)

    @property
    def arena_bytes(self):
        return list(self.eg.arena_bytes)

    @property
    def live_peak_bytes(self):
        return list(self.eg.live_peak_bytes)

    @property
    def class_of(self):
        """Per device, the device whose memory plan it has (itself unless built with classes=True,
        which sets the C++ option ExecOptions::device_classes)."""
        return list(self.eg.class_of)

    @property
    def host_bytes(self):
        """Per device: bytes of its host pool (swapped-out copies)."""
        return list(self.eg.host_bytes)

    def copy_schedule(self, int device):
        """Device `device`'s swap ops in the order its copy stream runs them."""
        if device < 0 or device >= <int>self.eg.copy_schedule.size():
            return []
        return list(self.eg.copy_schedule[device])

    def schedule(self, int device):
        if device < 0 or device >= self.eg.devices:
            raise _AutotileError(f"device {device} out of range (0..{self.eg.devices - 1})")
        return list(self.eg.schedule[device])

    def tile(self, int tensor, int device):
        """Buffer id of `device`'s planned tile of tensor id `tensor`."""
        if device < 0 or device >= self.eg.devices or tensor < 0 or \
                <size_t>(tensor + 1) * self.eg.devices > self.tile_count():
            raise _AutotileError(f"tile({tensor}, {device}) out of range")
        return self.eg.tile(tensor, device)

    cdef size_t tile_count(self):
        return self.eg.tile_of.size()

    def op_counts(self):
        """(compute ops, fetch ops, accumulating fetches, MultiFetch pieces, dependencies):
        stats without building every op's dict."""
        cdef size_t i
        cdef int64_t compute = 0, fetch = 0, reductions = 0, pieces = 0, deps = 0
        cdef int kind
        for i in range(self.eg.ops.size()):
            kind = autotile_op_kind(self.eg.ops[i])
            pieces += self.eg.ops[i].pieces.size()
            deps += self.eg.ops[i].deps.size()
            if kind == 0:
                compute += 1
            elif kind == 1:
                fetch += 1
                if self.eg.ops[i].accumulate:
                    reductions += 1
        return compute, fetch, reductions, pieces, deps

    def op(self, int i):
        """One op as a dict: kind ('compute'|'fetch'|'swap_out'|'swap_in'), device, node, inputs (-1: an input the op
        does not read, only its shape matters: input_boxes), outputs, pieces
        [(src buffer, lo, hi)], accumulate, deps, bytes_moved, time."""
        if i < 0 or i >= <int>self.eg.ops.size():
            raise _AutotileError(f"op {i} out of range")
        cdef CExecOp* op = &self.eg.ops[i]
        return {"kind": _KIND[autotile_op_kind(op[0])], "device": op.device, "node": op.node,
                "inputs": list(op.inputs), "outputs": list(op.outputs),
                "input_boxes": [(_box_lo(b), _box_hi(b)) for b in op.input_boxes],
                "pieces": [(p.src, _box_lo(p.region), _box_hi(p.region)) for p in op.pieces],
                "accumulate": op.accumulate, "deps": list(op.deps), "bytes_moved": op.bytes_moved, "time": op.time}

    def buffer(self, int i):
        """One buffer as a dict: device, tensor, lo, hi, role, partial, producer, readers, bytes,
        offset (in the device's arena, or in its host pool when `host`: a swapped-out copy)."""
        if i < 0 or i >= <int>self.eg.buffers.size():
            raise _AutotileError(f"buffer {i} out of range")
        cdef CBuffer* b = &self.eg.buffers[i]
        return {"device": b.device, "tensor": b.tensor, "lo": _box_lo(b.box), "hi": _box_hi(b.box),
                "role": _ROLE[autotile_buffer_role(b[0])], "partial": b.partial, "producer": b.producer,
                "readers": list(b.readers), "bytes": b.bytes, "offset": b.offset,
                "live": (b.live_begin, b.live_end), "host": b.host}


def build_exec_graph(Graph graph, factors, tensor_tilings, node_strategies, control_deps=True, swap_budget=0,
                     stage_above=8, order=None, swap_hold=0, arena_only=False,
                     arena_limit=0, classes=False, hierarchical_above=-1, cut_levels=None):
    """Execution graph of `graph` under a plan (factors, [tensor][cut] tilings, [node][cut] strategies).
    swap_budget (bytes per device, 0 = none): move tensors to host memory between uses until
    every device's live bytes fit it (exec/swap_plan.h). stage_above: collectives over larger
    groups run cut by cut (recursive halving and doubling; exec/exec_graph.h). order: the
    serial schedule as node ids, a topological order of every node (None: schedule_order).
    swap_hold: memory-clock units (6 a node) a swapped-out buffer keeps its memory after its
    last use, so its copy can finish before the memory is reused (exec/swap_plan.h).
    arena_only: only the memory plan's sizes (arena_bytes, live_peak_bytes, offsets): no
    dependencies, so the graph cannot be run (ExecOptions::arena_only; control_deps, no swap);
    with arena_limit > 0, when some device holds more than that at once nothing is placed and
    arena_bytes are the live peaks (a lower bound over the limit). classes (with arena_only;
    sets the C++ option ExecOptions::device_classes): build and plan one device of each class
    of devices with provably equal memory plans; the others' arena_bytes and live_peak_bytes
    are their class's (class_of), their buffers are not made. hierarchical_above: the collectives
    of tensors of more bytes follow the cut hierarchy, the outer cuts being the slower links
    (ExecOptions::hierarchical_above; -1: none, where that costs bytes or rounds). cut_levels:
    the link level of each cut; staged collectives take one level's consecutive cuts at once."""
    cdef CPlanSpec spec
    cdef CExecOptions opts
    try:
        spec.factors = [int(k) for k in factors]
    except OverflowError:
        raise _AutotileError(f"build_exec_graph: a cut factor in {list(factors)} is out of range") from None
    spec.tensor_tilings = [[_s(t) for t in row] for row in tensor_tilings]
    spec.node_strategies = [[_s(s) for s in row] for row in node_strategies]
    opts.control_deps = bool(control_deps)
    opts.swap_budget = int(swap_budget or 0)
    opts.stage_above = max(1, int(stage_above))
    opts.hierarchical_above = int(hierarchical_above)
    if cut_levels is not None:
        if len(cut_levels) != len(spec.factors):
            raise _AutotileError(f"build_exec_graph: {len(cut_levels)} cut levels for {len(spec.factors)} cuts")
        opts.cut_levels = [int(v) for v in cut_levels]
    opts.swap_hold = max(0, int(swap_hold))
    opts.arena_only = bool(arena_only)
    opts.arena_limit = max(0, int(arena_limit or 0))
    opts.device_classes = bool(classes)
    if order is not None:
        try:
            opts.order = [int(v) for v in order]
        except (OverflowError, TypeError, ValueError):
            raise _AutotileError(f"build_exec_graph: order must be node ids, got {list(order)[:5]}...") from None
    cdef ExecGraph result = ExecGraph()
    try:
        with nogil:
            result.eg = c_build_exec_graph(graph.g[0], spec, opts)
    except RuntimeError as e:
        _raise_core(e)
    return result


cdef FetchDType _fetch_dtype(const char* fmt, Py_ssize_t size):
    """The element type of a buffer-protocol format (native byte order only: any other copies
    as bytes and cannot accumulate)."""
    if fmt[0] == b"=" or fmt[0] == b"@" or fmt[0] == b"<":  # native on the little-endian hosts we build for
        fmt += 1
    if fmt[0] == 0 or fmt[1] != 0:
        return FetchDType.kBytes
    if (fmt[0] == b"f" and size == 4) or (fmt[0] == b"d" and size == 8):
        return FetchDType.kFloat32 if size == 4 else FetchDType.kFloat64
    if (fmt[0] == b"i" or fmt[0] == b"l" or fmt[0] == b"q") and (size == 4 or size == 8):
        return FetchDType.kInt32 if size == 4 else FetchDType.kInt64
    if fmt[0] == b"?":
        return FetchDType.kBool
    if fmt[0] == b"e" and size == 2:
        return FetchDType.kFloat16
    return FetchDType.kBytes


cdef int _get_buffer(obj, Py_buffer* view, int flags, what) except -1:
    try:
        PyObject_GetBuffer(obj, view, flags | PyBUF_C_CONTIGUOUS | PyBUF_FORMAT)
    except (BufferError, TypeError, ValueError) as e:
        raise _AutotileError(f"multifetch: {what} must be a C-contiguous{' writeable' if flags else ''} array ({e})") from None
    return 0


def multifetch(dst, dst_lo, pieces, accumulate=False, bfloat16=False):
    """Assemble region pieces into `dst` (a C-contiguous array holding the box starting at
    `dst_lo`). pieces: [(src array, src box lo, region lo, region hi)]. Releases the GIL.
    bfloat16: the arrays hold bfloat16 bits as uint16 (NumPy's buffer protocol has no
    bfloat16): accumulation sums them in float and rounds once."""
    # Pointers, shapes and element types come from the buffer protocol, not from NumPy
    # attributes: `.ctypes.data` runs Python code in NumPy, and after a large kernel has
    # evicted the caches one call spent ~100 us there.
    cdef vector[CFetchSource] srcs
    cdef CFetchSource s
    cdef vector[int64_t] lo = dst_lo
    cdef vector[int64_t] shape
    cdef Py_buffer out_buf, in_buf
    cdef int esize
    cdef FetchDType dt
    cdef cbool acc = bool(accumulate)
    cdef cbool same
    cdef int d
    _get_buffer(dst, &out_buf, PyBUF_WRITABLE, "the destination")
    try:
        dt = _fetch_dtype(out_buf.format, out_buf.itemsize)
        esize = out_buf.itemsize
        for d in range(out_buf.ndim):
            shape.push_back(out_buf.shape[d])
        for src, src_lo, rlo, rhi in pieces:
            # `pieces` keeps every source alive; its buffer view is released at once
            _get_buffer(src, &in_buf, 0, "a source")
            s.data = in_buf.buf
            same = in_buf.itemsize == esize and _fetch_dtype(in_buf.format, in_buf.itemsize) == dt and (
                dt != FetchDType.kBytes or strcmp(in_buf.format, out_buf.format) == 0)
            s.buf_shape.clear()
            for d in range(in_buf.ndim):
                s.buf_shape.push_back(in_buf.shape[d])
            PyBuffer_Release(&in_buf)
            if not same:
                raise _AutotileError("multifetch: sources must be of the destination's dtype")
            s.buf_lo = src_lo
            s.lo = rlo
            s.hi = rhi
            srcs.push_back(s)
        if bfloat16:
            if esize != 2 or dt != FetchDType.kBytes:
                raise _AutotileError("multifetch: bfloat16 data must be passed as 2-byte (uint16) views")
            dt = FetchDType.kBFloat16
        with nogil:
            c_multifetch(out_buf.buf, lo, shape, esize, dt, srcs, acc)
    except RuntimeError as e:
        _raise_core(e)
    finally:
        PyBuffer_Release(&out_buf)


def schedule_order(Graph graph):
    """The default serial schedule of `graph`'s nodes (node ids; exec/schedule_order.h)."""
    try:
        return list(c_schedule_order(graph.g[0]))
    except RuntimeError as e:
        _raise_core(e)
