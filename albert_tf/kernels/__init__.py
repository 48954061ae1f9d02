"""How the model's arithmetic runs on this machine: fused kernels and precision.

fused_ops.py (XLA kernels for bias + GELU and bias + residual + LayerNorm, oneDNN's
fused LayerNorm, chosen at trace time), precision.py (float32 / bf16 / fp16 and the
`auto` choice from the CPU's measured GEMM rates), cpu.py (what /proc/cpuinfo reports),
onednn.py (whether TensorFlow runs oneDNN, and the start-up choice; no TensorFlow
import), tf_internals.py (the one module of albert_tf that touches TensorFlow's private
API: each internal looked up once, with a fallback to the plain path where it is
missing; `missing_internals()` names those this TensorFlow lacks).

May import: albert_tf.errors, albert_tf.config.
"""
