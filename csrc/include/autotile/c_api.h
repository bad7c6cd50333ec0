/* autotile C API: the planner and the execution-graph pass for engines that embed the core
 * without Python (docs/embedding.md).
 *
 * Conventions (they hold for every function below):
 *  - Every function returns an AT_Status; AT_OK (0) is success. On failure at_last_error()
 *    returns a message naming the function and the node, tensor or argument at fault, and
 *    no out-parameter is written (except the needed size on AT_ERR_BUFFER_TOO_SMALL). No C++
 *    exception ever crosses this boundary.
 *  - Handles (AT_Graph, AT_Plan, AT_ExecGraph) are opaque. A NULL, freed ("stale") or
 *    wrong-kind handle is reported as AT_ERR_INVALID_HANDLE, never dereferenced: handles are
 *    registry keys that are never reused, not pointers.
 *  - Ids are dense int32_t from 0 (tensor ids and node ids of a graph; op and buffer ids of
 *    an execution graph). An id out of range is AT_ERR_OUT_OF_RANGE.
 *  - Strings returned as `const char**` are owned by the handle they came from (or are
 *    static) and stay valid until that handle is freed. Strings of a graph, which can still
 *    change, are copied into caller buffers instead.
 *  - Arrays returned as `const int32_t**` point into the (immutable) plan or execution graph
 *    and stay valid until that handle is freed; the pointer may be NULL when the count is 0.
 *  - Thread safety: different handles may be used from different threads freely. One graph
 *    may be read (searched, built, queried) by several threads at once; mutating calls on
 *    a graph are serialized with those reads. Plans and execution graphs are immutable.
 *  - Operators are described by TDL text (docs/tdl.md), the same text the Python registry
 *    generates; it is checked when the op is added. There is no way to hand over explicit
 *    strategies: the execution-graph pass re-derives regions from the TDL, so TDL is the
 *    single description both passes share.
 */
#ifndef AUTOTILE_C_API_H_
#define AUTOTILE_C_API_H_

#include <stddef.h>
#include <stdint.h>

/** \brief Marks the exported functions (default visibility when built as part of a shared library). */
#if defined(_WIN32)
#define AT_API
#else
#define AT_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** \brief Version of this C API; bumped when a function changes incompatibly. */
#define AT_API_VERSION 1
/** \brief Largest device count at_search accepts: execution-graph construction grows faster
 * than linearly in the device count (about 1 s for a 2-op graph on 4096 devices). */
#define AT_MAX_DEVICES 4096
/** \brief The id value meaning "none" (a graph input's producer, a tensor not found). */
#define AT_NONE (-1)

/* Every enum below also lists AT_*_RANGE_MIN_/MAX_ so that its range is all of int32_t
 * (the Vulkan idiom): a C caller can pass any int through an enum parameter, and in C++
 * reading such a value is only defined when it lies within the enum's range. Invalid values
 * are then reported as AT_ERR_INVALID_ARGUMENT instead of being undefined behaviour. */
/** \brief The two range enumerators every C API enum ends with (see above). */
#define AT_ENUM_RANGE_(prefix) prefix##RANGE_MIN_ = -0x7fffffff - 1, prefix##RANGE_MAX_ = 0x7fffffff

/** \brief Result of every C API call. */
typedef enum AT_Status {
  AT_OK = 0,                   /**< success */
  AT_ERR_NULL_ARGUMENT = 1,    /**< a required pointer argument is NULL */
  AT_ERR_INVALID_HANDLE = 2,   /**< a handle is NULL, already freed, or of another kind */
  AT_ERR_OUT_OF_RANGE = 3,     /**< an id, index, cut or device number is out of range */
  AT_ERR_INVALID_ARGUMENT = 4, /**< a value is malformed (negative count, unknown enum or name) */
  AT_ERR_INVALID_INPUT = 5,    /**< the core rejected the input (bad TDL, cycle, no feasible plan, ...) */
  AT_ERR_BUFFER_TOO_SMALL = 6, /**< a caller buffer is too small; the needed size was written */
  AT_ERR_OUT_OF_MEMORY = 7,    /**< an allocation failed */
  AT_ERR_INTERNAL = 8,         /**< a bug in autotile (please report the message) */
  AT_ENUM_RANGE_(AT_STATUS_)
} AT_Status;

/** \brief Element type of a tensor (sizes in bytes: 4, 8, 2, 4, 8, 1, 1, 1, 2). */
typedef enum AT_DType {
  AT_FLOAT32 = 0,
  AT_FLOAT64 = 1,
  AT_FLOAT16 = 2,
  AT_INT32 = 3,
  AT_INT64 = 4,
  AT_INT8 = 5,
  AT_UINT8 = 6,
  AT_BOOL = 7,
  AT_BFLOAT16 = 8,
  AT_ENUM_RANGE_(AT_DTYPE_)
} AT_DType;

/** \brief What an op does in a training step. */
typedef enum AT_Role {
  AT_ROLE_FORWARD = 0,
  AT_ROLE_BACKWARD = 1,
  AT_ROLE_UPDATE = 2,
  AT_ENUM_RANGE_(AT_ROLE_)
} AT_Role;

/** \brief Kind of an execution-graph op. */
typedef enum AT_OpKind {
  AT_OP_COMPUTE = 0, /**< runs the node's kernel on this device's tile */
  AT_OP_FETCH = 1,   /**< MultiFetch: assembles (or, accumulating, reduces) a region from pieces */
  AT_ENUM_RANGE_(AT_OP_KIND_)
} AT_OpKind;

/** \brief What an execution-graph buffer holds. */
typedef enum AT_BufferRole {
  AT_BUFFER_TILE = 0,  /**< a device's planned tile of a tensor */
  AT_BUFFER_RAW = 1,   /**< a compute op's output before conversion to the planned tiling */
  AT_BUFFER_REGION = 2, /**< an input region assembled for one compute op */
  AT_ENUM_RANGE_(AT_BUFFER_ROLE_)
} AT_BufferRole;

/** \brief Flag of at_exec_build: place fetches as early as possible instead of adding
 * Tofu's control dependencies (longer buffer lifetimes, larger arenas). */
#define AT_EXEC_NO_CONTROL_DEPS 1u

/** \brief A training graph under construction (tensors + ops). */
typedef struct AT_Graph AT_Graph;
/** \brief The result of a search: a tiling per tensor and a strategy per op, per cut. */
typedef struct AT_Plan AT_Plan;
/** \brief A per-device execution graph with its memory plan. */
typedef struct AT_ExecGraph AT_ExecGraph;

/** \brief Knobs of at_search. Initialise with at_search_options_init, then set fields. */
typedef struct AT_SearchOptions {
  /** sizeof(AT_SearchOptions) as the caller compiled it (lets later versions add fields). */
  uint32_t struct_size;
  /** Ops with empty TDL text run replicated instead of failing the search (0 or 1). */
  int32_t replicate_fallback;
  /** Bytes/s of the link each cut crosses, one per cut (any order); NULL: unweighted. */
  const double* bandwidths;
  /** Number of entries in bandwidths. */
  int32_t num_bandwidths;
  /** Most tiling combinations the "bruteforce" algorithm enumerates per cut; 0: default. */
  int64_t bruteforce_limit;
} AT_SearchOptions;

/* ------------------------------------------------------------------ general */

/** \brief Version string of the library ("0.1.0"); static storage. */
AT_API const char* at_version(void);
/** \brief Message of the last failed call on this thread; "" after a successful call. */
AT_API const char* at_last_error(void);
/** \brief Name of a status ("AT_OK", "AT_ERR_OUT_OF_RANGE", ...; "unknown status" otherwise). */
AT_API const char* at_status_name(AT_Status status);
/** \brief Parses a NumPy-style dtype name ("float32", "int64", "bool", ...). */
AT_API AT_Status at_dtype_from_name(const char* name, AT_DType* out);
/** \brief NumPy-style name of a dtype (static storage). */
AT_API AT_Status at_dtype_name(AT_DType dtype, const char** out);
/** \brief Size of one element of `dtype` in bytes. */
AT_API AT_Status at_dtype_size(AT_DType dtype, int32_t* out);
/** \brief Number of search algorithms at_search implements. */
AT_API AT_Status at_num_algorithms(int32_t* out);
/** \brief Name of algorithm `index` ("tofu", "data", "bruteforce", ...; static storage). */
AT_API AT_Status at_algorithm_name(int32_t index, const char** out);

/* ------------------------------------------------------------------ graph */

/** \brief Creates an empty graph. */
AT_API AT_Status at_graph_create(AT_Graph** out);
/** \brief Frees a graph; NULL is a no-op (AT_OK), a stale handle is AT_ERR_INVALID_HANDLE.
 * Plans and execution graphs made from it stay valid. */
AT_API AT_Status at_graph_free(AT_Graph* graph);
/** \brief Adds a tensor of shape dims[0..ndim) (ndim 0: a scalar, dims may be NULL).
 * Names are unique; dims positive; ndim <= 16. `is_param`: a trainable weight. */
AT_API AT_Status at_graph_add_tensor(AT_Graph* graph, const char* name, int32_t ndim, const int64_t* dims,
                                     AT_DType dtype, int32_t is_param, int32_t* out_id);
/** \brief Adds an op `name` of type `op_type` reading `inputs` and writing `outputs` (each
 * output tensor gets exactly one producer). `tdl`: its TDL description (docs/tdl.md), NULL
 * or "" for none (then the search needs replicate_fallback); it is analysed against the
 * tensors' shapes here, so malformed text fails now, naming the op. */
AT_API AT_Status at_graph_add_op(AT_Graph* graph, const char* name, const char* op_type, int32_t num_inputs,
                                 const int32_t* inputs, int32_t num_outputs, const int32_t* outputs, const char* tdl,
                                 AT_Role role, int32_t* out_id);
/** \brief Marks op `node` as the backward op generated for `forward_node` (sets its role to
 * backward); coarsening groups them (Tofu Sec 5.1). */
AT_API AT_Status at_graph_set_backward_of(AT_Graph* graph, int32_t node, int32_t forward_node);
/** \brief Records that tensor `grad` is the gradient of tensor `tensor` (same shape). */
AT_API AT_Status at_graph_set_gradient(AT_Graph* graph, int32_t tensor, int32_t grad);
/** \brief Marks a tensor as a result of the graph (loss, gradient, updated weight). */
AT_API AT_Status at_graph_mark_output(AT_Graph* graph, int32_t tensor);
/** \brief Sets attribute `key` of op `node` to `value` (kept for the engine's kernels). */
AT_API AT_Status at_graph_set_attr(AT_Graph* graph, int32_t node, const char* key, const char* value);
/** \brief Sets the role of op `node`. */
AT_API AT_Status at_graph_set_role(AT_Graph* graph, int32_t node, AT_Role role);
/** \brief Checks the whole graph (ids, no cycles); AT_ERR_INVALID_INPUT names the problem. */
AT_API AT_Status at_graph_validate(AT_Graph* graph);
/** \brief Number of tensors. */
AT_API AT_Status at_graph_num_tensors(AT_Graph* graph, int32_t* out);
/** \brief Number of ops. */
AT_API AT_Status at_graph_num_nodes(AT_Graph* graph, int32_t* out);
/** \brief Id of the tensor named `name`, or AT_NONE (with AT_OK) if there is none. */
AT_API AT_Status at_graph_find_tensor(AT_Graph* graph, const char* name, int32_t* out_id);
/** \brief Id of the op named `name`, or AT_NONE (with AT_OK) if there is none. */
AT_API AT_Status at_graph_find_node(AT_Graph* graph, const char* name, int32_t* out_id);
/** \brief Copies the name of tensor `tensor` into buf (NUL-terminated). *out_len gets its
 * length without the NUL. buf NULL with capacity 0 only queries the length;
 * AT_ERR_BUFFER_TOO_SMALL if capacity < length + 1. */
AT_API AT_Status at_graph_tensor_name(AT_Graph* graph, int32_t tensor, char* buf, size_t capacity,
                                      size_t* out_len);
/** \brief Copies the name of op `node` into buf (same rules as at_graph_tensor_name). */
AT_API AT_Status at_graph_node_name(AT_Graph* graph, int32_t node, char* buf, size_t capacity, size_t* out_len);
/** \brief Shape of a tensor: *out_ndim gets its rank, dims[0..ndim) its dims (dims may be
 * NULL with capacity 0 to query the rank; AT_ERR_BUFFER_TOO_SMALL if capacity < rank). */
AT_API AT_Status at_graph_tensor_shape(AT_Graph* graph, int32_t tensor, int64_t* dims, int32_t capacity,
                                       int32_t* out_ndim);
/** \brief Dtype and is_param flag of a tensor (either out-pointer may be NULL). */
AT_API AT_Status at_graph_tensor_info(AT_Graph* graph, int32_t tensor, AT_DType* out_dtype, int32_t* out_is_param);

/* ------------------------------------------------------------------ search and plan */

/** \brief Fills `options` with the defaults (and its struct_size). */
AT_API AT_Status at_search_options_init(AT_SearchOptions* options);
/** \brief Plans `graph` for `devices` devices (1..AT_MAX_DEVICES) with `algorithm` (NULL:
 * "tofu"; see at_algorithm_name). `options` may be NULL (defaults). */
AT_API AT_Status at_search(AT_Graph* graph, int32_t devices, const char* algorithm, const AT_SearchOptions* options,
                           AT_Plan** out_plan);
/** \brief Frees a plan; NULL is a no-op, a stale handle is AT_ERR_INVALID_HANDLE. */
AT_API AT_Status at_plan_free(AT_Plan* plan);
/** \brief Algorithm that made the plan (owned by the plan). */
AT_API AT_Status at_plan_algorithm(AT_Plan* plan, const char** out);
/** \brief Number of devices the plan is for. */
AT_API AT_Status at_plan_devices(AT_Plan* plan, int32_t* out);
/** \brief Number of cuts (prime factors of the device count; 0 for one device). */
AT_API AT_Status at_plan_num_cuts(AT_Plan* plan, int32_t* out);
/** \brief Ways cut `cut` splits (largest first: 12 devices -> 3, 2, 2). */
AT_API AT_Status at_plan_factor(AT_Plan* plan, int32_t cut, int32_t* out);
/** \brief Bytes moved by all devices because of cut `cut`. */
AT_API AT_Status at_plan_cut_cost(AT_Plan* plan, int32_t cut, double* out);
/** \brief Bytes moved in one training step (sum of the cut costs). */
AT_API AT_Status at_plan_total_bytes(AT_Plan* plan, double* out);
/** \brief Sum of cut cost / bandwidth (equals total bytes without bandwidths). */
AT_API AT_Status at_plan_weighted_cost(AT_Plan* plan, double* out);
/** \brief Seconds the search took. */
AT_API AT_Status at_plan_search_seconds(AT_Plan* plan, double* out);
/** \brief Number of tensors the plan tiles (the graph's count when it was planned). */
AT_API AT_Status at_plan_num_tensors(AT_Plan* plan, int32_t* out);
/** \brief Number of ops the plan assigns strategies to. */
AT_API AT_Status at_plan_num_nodes(AT_Plan* plan, int32_t* out);
/** \brief Tiling of tensor `tensor` at cut `cut`: "split(d)", "replicate" or "partial". */
AT_API AT_Status at_plan_tiling(AT_Plan* plan, int32_t tensor, int32_t cut, const char** out);
/** \brief Strategy of op `node` at cut `cut`: the TDL variable split, or "replicate". */
AT_API AT_Status at_plan_strategy(AT_Plan* plan, int32_t node, int32_t cut, const char** out);

/* ------------------------------------------------------------------ execution graph */

/** \brief Builds the per-device execution graph of `graph` under `plan` (flags: 0 or
 * AT_EXEC_NO_CONTROL_DEPS). AT_ERR_INVALID_INPUT if the plan does not fit the graph. */
AT_API AT_Status at_exec_build(AT_Graph* graph, AT_Plan* plan, uint32_t flags, AT_ExecGraph** out_exec);
/** \brief Frees an execution graph; NULL is a no-op, a stale handle is AT_ERR_INVALID_HANDLE. */
AT_API AT_Status at_exec_free(AT_ExecGraph* exec);
/** \brief Number of devices. */
AT_API AT_Status at_exec_num_devices(AT_ExecGraph* exec, int32_t* out);
/** \brief Number of ops (all devices). */
AT_API AT_Status at_exec_num_ops(AT_ExecGraph* exec, int32_t* out);
/** \brief Number of buffers (all devices). */
AT_API AT_Status at_exec_num_buffers(AT_ExecGraph* exec, int32_t* out);
/** \brief Ops of `device` in execution order. */
AT_API AT_Status at_exec_schedule(AT_ExecGraph* exec, int32_t device, const int32_t** out_ops, int32_t* out_count);
/** \brief Scalars of op `op` (any out-pointer may be NULL): kind, device, the training-graph
 * op it computes or fetches for, whether a fetch accumulates (reduction), bytes it reads
 * from other devices. */
AT_API AT_Status at_exec_op(AT_ExecGraph* exec, int32_t op, AT_OpKind* out_kind, int32_t* out_device,
                            int32_t* out_node, int32_t* out_accumulate, int64_t* out_bytes_moved);
/** \brief Input buffers of a compute op, one per op input (-1: an input the op never reads);
 * empty for a fetch. */
AT_API AT_Status at_exec_op_inputs(AT_ExecGraph* exec, int32_t op, const int32_t** out_buffers, int32_t* out_count);
/** \brief Output buffers: one per op output (compute) or the destination (fetch). */
AT_API AT_Status at_exec_op_outputs(AT_ExecGraph* exec, int32_t op, const int32_t** out_buffers, int32_t* out_count);
/** \brief Ops that must finish before `op` (data, control and memory-reuse dependencies). */
AT_API AT_Status at_exec_op_deps(AT_ExecGraph* exec, int32_t op, const int32_t** out_ops, int32_t* out_count);
/** \brief Region of input `input` a compute op works on (absolute tensor coordinates,
 * lo/hi per dim, [lo, hi)); capacity rules as at_graph_tensor_shape. */
AT_API AT_Status at_exec_op_input_box(AT_ExecGraph* exec, int32_t op, int32_t input, int64_t* lo, int64_t* hi,
                                      int32_t capacity, int32_t* out_ndim);
/** \brief Number of MultiFetch pieces of `op` (0 for compute ops). */
AT_API AT_Status at_exec_op_num_pieces(AT_ExecGraph* exec, int32_t op, int32_t* out);
/** \brief Piece `piece` of a fetch: source buffer and region [lo, hi) in absolute tensor
 * coordinates (copied, or added when the op accumulates, into the destination). */
AT_API AT_Status at_exec_op_piece(AT_ExecGraph* exec, int32_t op, int32_t piece, int32_t* out_src_buffer, int64_t* lo,
                                  int64_t* hi, int32_t capacity, int32_t* out_ndim);
/** \brief Scalars of buffer `buffer` (any out-pointer may be NULL): device, tensor, role,
 * partial (holds a partial sum), producing op (-1: preloaded graph input), bytes, byte offset
 * in the device arena. */
AT_API AT_Status at_exec_buffer(AT_ExecGraph* exec, int32_t buffer, int32_t* out_device, int32_t* out_tensor,
                                AT_BufferRole* out_role, int32_t* out_partial, int32_t* out_producer,
                                int64_t* out_bytes, int64_t* out_offset);
/** \brief Box of the tensor a buffer holds ([lo, hi) per dim; capacity rules as
 * at_graph_tensor_shape). */
AT_API AT_Status at_exec_buffer_box(AT_ExecGraph* exec, int32_t buffer, int64_t* lo, int64_t* hi, int32_t capacity,
                                    int32_t* out_ndim);
/** \brief Buffer holding `device`'s planned tile of tensor `tensor`. */
AT_API AT_Status at_exec_tile(AT_ExecGraph* exec, int32_t tensor, int32_t device, int32_t* out_buffer);
/** \brief Arena size of `device` in bytes (the memory plan). */
AT_API AT_Status at_exec_arena_bytes(AT_ExecGraph* exec, int32_t device, int64_t* out);
/** \brief Most bytes live at once on `device` (a lower bound of the arena). */
AT_API AT_Status at_exec_live_peak_bytes(AT_ExecGraph* exec, int32_t device, int64_t* out);
/** \brief Bytes `device` receives from other devices in one step. */
AT_API AT_Status at_exec_bytes_received(AT_ExecGraph* exec, int32_t device, int64_t* out);
/** \brief Bytes moved between devices in one step (all fetches). */
AT_API AT_Status at_exec_bytes_moved(AT_ExecGraph* exec, int64_t* out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* AUTOTILE_C_API_H_ */
