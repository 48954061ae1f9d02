"""The one module of albert_tf that reaches into TensorFlow's private API.

TensorFlow promises nothing about `tensorflow.python.*`, `tf.__internal__` or
private methods such as `Graph._create_op_internal`: any release may move or drop
them. Each one albert_tf uses is read here by one small function, which
  * looks the internal up once (`_lookup`: an import or attribute that fails is
    remembered as missing, not retried on every traced call), and
  * where it is missing, gives a documented fallback under which the plain
    TensorFlow path runs: slower, never wrong, and never a SavedModel holding XLA
    functions or oneDNN-internal ops.
`missing_internals()` names the internals this TensorFlow lacks. It is empty on the
pinned TensorFlow, which tests/kernels/test_tf_internals.py asserts without ever skipping, so
an upgrade that drops one fails a test instead of switching a fast path off silently.
"""
from __future__ import annotations

import functools
import importlib

import tensorflow as tf

# (module, attribute path within it) of each internal used here.
SAVE_CONTEXT_PROBE = ("tensorflow.python.saved_model.save_context", "in_save_context")
XLA_CONTEXT_PROBE = ("tensorflow.python.ops.control_flow_util", "GraphOrParentsInXlaContext")
ONEDNN_SWITCH = ("tensorflow.python.util._pywrap_util_port", "IsMklEnabled")
OP_DEF_LOOKUP = ("tensorflow.python.framework.op_def_registry", "get")
RAW_OP_MAKER = ("tensorflow", "Graph._create_op_internal")
ATTR_VALUE_PROTO = ("tensorflow.core.framework.attr_value_pb2", "AttrValue")
VARIABLE_FREEZER = ("tensorflow.python.framework.convert_to_constants",
                    "convert_variables_to_constants_v2")
TFLITE_SCHEMA = ("tensorflow.lite.python.schema_py_generated", "ModelT")
_FAILURE_HANDLING = "tensorflow.python.distribute.failure_handling.failure_handling_util"
ON_GCP = (_FAILURE_HANDLING, "on_gcp")
GCE_MAINTENANCE_CHECK = (_FAILURE_HANDLING, "termination_watcher_function_gce")
COORDINATION_CONFIG = ("tensorflow.compiler.xla.tsl.protobuf.coordination_config_pb2",
                       "CoordinatedJob")
EAGER_CONTEXT = ("tensorflow.python.eager.context", "context")
INTERNALS = (SAVE_CONTEXT_PROBE, XLA_CONTEXT_PROBE, ONEDNN_SWITCH, OP_DEF_LOOKUP,
             RAW_OP_MAKER, ATTR_VALUE_PROTO, VARIABLE_FREEZER, TFLITE_SCHEMA,
             ON_GCP, GCE_MAINTENANCE_CHECK, COORDINATION_CONFIG, EAGER_CONTEXT)

ONEDNN_LAYER_NORM_OP = "_MklLayerNorm"


@functools.cache
def _lookup(module: str, attribute: str):
    """`module.attribute` (a dotted attribute path), or None where this TensorFlow lacks
    the module or the attribute. Cached: each internal is looked up once per process."""
    try:
        value = importlib.import_module(module)
        for name in attribute.split("."):
            value = getattr(value, name)
    except (ImportError, AttributeError):
        return None
    return value


def _ask(internal, missing_answer: bool, *args) -> bool:
    """bool(internal(*args)) for a function among INTERNALS, or `missing_answer` where
    this TensorFlow lacks it."""
    function = _lookup(*internal)
    return missing_answer if function is None else bool(function(*args))


def missing_internals() -> list[str]:
    """The dotted names of the internals in INTERNALS that this TensorFlow lacks (each
    then takes its function's fallback); [] on the pinned TensorFlow."""
    return [f"{module}.{attribute}" for module, attribute in INTERNALS
            if _lookup(module, attribute) is None]


def tracing_for_saved_model() -> bool:
    """Whether the function being traced is traced by `tf.saved_model.save`
    (TensorFlow's save context). Why: exports must hold plain TensorFlow ops only (no
    XLA functions, which TF Serving does not compile by default, and no oneDNN-internal
    ops, which builds without oneDNN cannot load), and nothing public tells an
    export's trace from any other.

    Missing internal: True, every trace is taken as an export's, so every graph is
    traced plain (portable everywhere; in-process graphs lose the fused kernels)."""
    return _ask(SAVE_CONTEXT_PROBE, True)


def compiled_by_xla() -> bool:
    """Whether the graph being traced (or a graph enclosing it) is compiled whole by XLA
    (`tf.function(jit_compile=True)`, TPUs). Why: XLA fuses the plain ops itself, faster
    than our kernels, and cannot compile oneDNN's internal `_MklLayerNorm`; nothing
    public tells while tracing.

    Missing internal: True, every graph is taken as compiled by XLA, so the plain ops
    run (correct under XLA and outside it; the fused kernels are not used)."""
    return _ask(XLA_CONTEXT_PROBE, True, tf.compat.v1.get_default_graph())


def onednn_enabled() -> bool:
    """Whether this process runs TensorFlow's oneDNN (formerly MKL) kernels and graph
    rewrites: a build with oneDNN (the default x86-64 Linux wheel) not switched off by
    TF_ENABLE_ONEDNN_OPTS=0. Why: it decides how LayerNorms are best spelled (grappler
    rewrites one spelling into oneDNN's kernel only where oneDNN is on), and TensorFlow
    has no public query for it.

    Missing internal: False ("oneDNN off"): exports spell LayerNorms as plain ops (the
    same speed everywhere) and the in-process oneDNN LayerNorm is not used."""
    return _ask(ONEDNN_SWITCH, False)


@functools.cache
def onednn_layer_norm_op_available() -> bool:
    """Whether `make_onednn_layer_norm` can build oneDNN's LayerNorm op here: the build
    registers `_MklLayerNorm` (an op with no Python wrapper, hence the op-def registry)
    and graphs can still make a raw op (`Graph._create_op_internal`, with its
    `AttrValue` protos). Says nothing about whether oneDNN is on (`onednn_enabled`).

    Missing internals (or no `_MklLayerNorm` in this build): False, and the XLA
    add + LayerNorm kernel runs instead."""
    get_op_def = _lookup(*OP_DEF_LOOKUP)
    return (get_op_def is not None and get_op_def(ONEDNN_LAYER_NORM_OP) is not None
            and _lookup(*RAW_OP_MAKER) is not None and _lookup(*ATTR_VALUE_PROTO) is not None)


def make_onednn_layer_norm(z, gamma, beta, epsilon: float, name: str):
    """The float32 output of a new `_MklLayerNorm` op in the graph being traced:
    LayerNorm(z) * gamma + beta over the last axis of float32 z (gamma, beta: float32
    [H]). Why: internal ops have no Python wrapper, and the public `Graph.create_op` is
    deprecated, so the op is made with `Graph._create_op_internal`.

    Missing internal: call only where `onednn_layer_norm_op_available()`; without
    `_create_op_internal` or `AttrValue` this raises NotImplementedError (and building
    an op this TensorFlow does not register raises TensorFlow's own error)."""
    attr_value, make_op = _lookup(*ATTR_VALUE_PROTO), _lookup(*RAW_OP_MAKER)
    if attr_value is None or make_op is None:
        raise NotImplementedError(f"this TensorFlow cannot make {ONEDNN_LAYER_NORM_OP}: "
                                  f"missing {', '.join(missing_internals())}")
    op = make_op(
        tf.compat.v1.get_default_graph(), ONEDNN_LAYER_NORM_OP, [z, gamma, beta],
        [tf.float32], name=name,
        attrs={"T": attr_value(type=tf.float32.as_datatype_enum),
               "epsilon": attr_value(f=epsilon)})
    return op.outputs[0]


def freeze_variables(concrete_function):
    """`concrete_function` with every variable it reads replaced by a constant of its
    current value (a ConcreteFunction taking the same flat tensors, no structure). Why:
    TensorFlow's LiteRT converter, given variables, keeps them as resource variables
    that nobody initialises (a file without its weights, whose outputs are NaN); given
    constants, it stores each once (a weight shared by ALBERT's layers is one constant
    however many layers read it). Nothing public freezes a TF2 function.

    Missing internal: raises NotImplementedError (LiteRT export is then unavailable;
    SavedModel and ONNX exports do not need it)."""
    freeze = _lookup(*VARIABLE_FREEZER)
    if freeze is None:
        raise NotImplementedError(f"this TensorFlow cannot freeze variables for LiteRT "
                                  f"export: missing {'.'.join(VARIABLE_FREEZER)}")
    return freeze(concrete_function)


def tflite_schema():
    """TensorFlow's generated Python module for the LiteRT flatbuffer schema (`Model`,
    `ModelT`, `MetadataT`, `BufferT`, ...), to write metadata into a converted model.
    Why: the converter has no public way to add metadata, and the flatbuffer classes
    ship only inside TensorFlow (and the optional `ai_edge_litert` runtime, preferred by
    `albert_tf.export.litert` when installed).

    Missing internal: None; the caller then needs `ai_edge_litert`."""
    if _lookup(*TFLITE_SCHEMA) is None:
        return None
    return importlib.import_module(TFLITE_SCHEMA[0])


def gce_termination_watcher():
    """TensorFlow's check for Google Cloud's host-maintenance notice (a function returning
    True once the VM will be taken down), or None off Google Cloud. Asks the metadata server
    (up to 5 s): call it off the training thread. Why: PreemptionCheckpointHandler's GCE
    support is the only maintained reader of that notice.

    Missing internal: None (SIGTERM, which GCE sends before a preemption, still works)."""
    on_gcp, check = _lookup(*ON_GCP), _lookup(*GCE_MAINTENANCE_CHECK)
    if on_gcp is None or check is None or not on_gcp():
        return None
    return check


def configure_worker_heartbeat(cluster_spec, heartbeat_timeout_seconds: float) -> bool:
    """Starts TensorFlow's coordination service (as MultiWorkerMirroredStrategy would, with
    the chief, else worker 0, as its leader) with a heartbeat timeout of
    `heartbeat_timeout_seconds`: a worker silent for that long is reported lost to every
    other worker, whose collectives then abort. Call before the strategy is built; returns
    whether it was configured. Why: the strategy itself leaves TensorFlow's default timeout.

    Missing internal: False, and the strategy's default heartbeat (10 s) applies."""
    coordinated_job = _lookup(*COORDINATION_CONFIG)
    context = _lookup(*EAGER_CONTEXT)
    if coordinated_job is None or context is None:
        return False
    jobs = cluster_spec.as_dict()
    leader_job = "chief" if "chief" in jobs else "worker"
    coordinated = [coordinated_job(name=job, num_tasks=cluster_spec.num_tasks(job))
                   for job in ("chief", "worker") if job in jobs]
    context().configure_coordination_service(
        service_type="standalone", service_leader=f"/job:{leader_job}/replica:0/task:0",
        coordinated_jobs=coordinated,
        heartbeat_timeout_in_ms=int(heartbeat_timeout_seconds * 1000))
    return True
