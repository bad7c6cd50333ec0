# Bindings of csrc/graph: the core graph IR.

cdef extern from "graph/graph.h" namespace "autotile":
    ctypedef int32_t TensorId
    ctypedef int32_t NodeId

    cdef enum class NodeRole "autotile::NodeRole":
        kForward "autotile::NodeRole::kForward"
        kBackward "autotile::NodeRole::kBackward"
        kUpdate "autotile::NodeRole::kUpdate"

    cdef cppclass CTensor "autotile::Tensor":
        string name
        vector[int64_t] shape
        NodeId producer
        vector[NodeId] consumers
        TensorId gradient
        TensorId gradient_of
        cbool is_param
        cbool is_output
        int64_t num_elements()
        int64_t bytes()

    cdef cppclass CNode "autotile::Node":
        string name
        string op
        vector[TensorId] inputs
        vector[TensorId] outputs
        cmap[string, string] attrs
        string tdl
        NodeRole role
        NodeId forward_node

    cdef cppclass CGraph "autotile::Graph":
        TensorId add_tensor(const string&, const vector[int64_t]&, DType, cbool) except +
        NodeId add_node(const string&, const string&, const vector[TensorId]&, const vector[TensorId]&,
                        const string&, NodeRole) except +
        void set_attr(NodeId, const string&, const string&) except +
        void set_backward_of(NodeId, NodeId) except +
        void set_gradient(TensorId, TensorId) except +
        void set_role(NodeId, NodeRole) except +
        void mark_output(TensorId) except +
        int32_t num_tensors()
        int32_t num_nodes()
        const CTensor& tensor(TensorId) except +
        const CNode& node(NodeId) except +
        TensorId tensor_id(const string&) except +
        NodeId find_node(const string&)
        vector[NodeId] topo_order() except +
        void validate() except +

cdef extern from "graph/dtype.h" namespace "autotile":
    cdef enum class DType "autotile::DType":
        pass
    DType dtype_from_name(const string&) except +
    const char* dtype_name(DType)


from operator import index as _index


def _as_id(value, what, kind, count):
    """`value` as an int32 id; an integer beyond int32 is out of range for any graph (an
    autotile.Error like the core's, not OverflowError)."""
    try:
        v = _index(value)
    except TypeError:
        raise _AutotileError(f"{what}: {kind} id must be an integer, got {value!r}") from None
    if not -2 ** 31 <= v < 2 ** 31:
        raise _AutotileError(f"{what}: {kind} id {v} out of range (graph has {count} {kind}s)")
    return v


_ROLES = {"forward": NodeRole.kForward, "backward": NodeRole.kBackward, "update": NodeRole.kUpdate}
_ROLE_NAMES = {int(NodeRole.kForward): "forward", int(NodeRole.kBackward): "backward", int(NodeRole.kUpdate): "update"}


cdef class Graph:
    """The core graph IR (csrc/graph/graph.h). Dense integer ids for tensors and nodes.

    Python builds it with add_tensor/add_node; every call is validated in C++ and bad
    arguments raise autotile.Error naming the tensor or node at fault."""
    cdef CGraph* g

    def __cinit__(self):
        self.g = new CGraph()

    def __dealloc__(self):
        del self.g

    def add_tensor(self, name, shape, dtype="float32", is_param=False):
        try:
            return self.g.add_tensor(_s(name), [int(d) for d in shape], dtype_from_name(_s(dtype)), bool(is_param))
        except (RuntimeError, OverflowError) as e:
            _raise_core(e)

    def add_node(self, name, op, inputs, outputs, tdl="", role="forward"):
        if role not in _ROLES:
            raise _AutotileError(f"add_node: node '{name}' has unknown role '{role}' (forward, backward, update)")
        try:
            return self.g.add_node(_s(name), _s(op), [int(t) for t in inputs], [int(t) for t in outputs],
                                   _s(tdl or ""), _ROLES[role])
        except (RuntimeError, OverflowError, TypeError) as e:
            _raise_core(e)

    def set_attr(self, node, key, value):
        node = _as_id(node, "set_attr", "node", self.g.num_nodes())
        try:
            self.g.set_attr(node, _s(key), _s(value))
        except RuntimeError as e:
            _raise_core(e)

    def set_backward_of(self, node, forward_node):
        node = _as_id(node, "set_backward_of", "node", self.g.num_nodes())
        forward_node = _as_id(forward_node, "set_backward_of", "node", self.g.num_nodes())
        try:
            self.g.set_backward_of(node, forward_node)
        except RuntimeError as e:
            _raise_core(e)

    def set_gradient(self, tensor, grad):
        tensor = _as_id(tensor, "set_gradient", "tensor", self.g.num_tensors())
        grad = _as_id(grad, "set_gradient", "tensor", self.g.num_tensors())
        try:
            self.g.set_gradient(tensor, grad)
        except RuntimeError as e:
            _raise_core(e)

    def set_role(self, node, role):
        node = _as_id(node, "set_role", "node", self.g.num_nodes())
        if role not in _ROLES:
            raise _AutotileError(f"set_role: unknown role '{role}'")
        try:
            self.g.set_role(node, _ROLES[role])
        except RuntimeError as e:
            _raise_core(e)

    def mark_output(self, tensor):
        """Marks tensor id `tensor` as a result of the graph (its memory is never reused)."""
        tensor = _as_id(tensor, "mark_output", "tensor", self.g.num_tensors())
        try:
            self.g.mark_output(tensor)
        except RuntimeError as e:
            _raise_core(e)

    @property
    def num_tensors(self):
        return self.g.num_tensors()

    @property
    def num_nodes(self):
        return self.g.num_nodes()

    def tensor(self, tid):
        """A dict describing tensor `tid`."""
        tid = _as_id(tid, "tensor", "tensor", self.g.num_tensors())
        try:
            t = self.g.tensor(tid)
        except RuntimeError as e:
            _raise_core(e)
        return {"name": _u(t.name), "shape": tuple(t.shape), "producer": t.producer,
                "consumers": list(t.consumers), "gradient": t.gradient, "gradient_of": t.gradient_of,
                "is_param": t.is_param, "is_output": t.is_output, "bytes": t.bytes()}

    def node(self, nid):
        """A dict describing node `nid`."""
        nid = _as_id(nid, "node", "node", self.g.num_nodes())
        try:
            n = self.g.node(nid)
        except RuntimeError as e:
            _raise_core(e)
        return {"name": _u(n.name), "op": _u(n.op), "inputs": list(n.inputs), "outputs": list(n.outputs),
                "attrs": {_u(k): _u(v) for k, v in n.attrs}, "tdl": _u(n.tdl),
                "role": _ROLE_NAMES[int(n.role)], "forward_node": n.forward_node}

    def tensor_id(self, name):
        try:
            return self.g.tensor_id(_s(name))
        except RuntimeError as e:
            _raise_core(e)

    def find_node(self, name):
        return self.g.find_node(_s(name))

    def topo_order(self):
        try:
            return list(self.g.topo_order())
        except RuntimeError as e:
            _raise_core(e)

    def validate(self):
        try:
            self.g.validate()
        except RuntimeError as e:
            _raise_core(e)
