"""How the model's arithmetic runs on this machine: fused kernels and precision.

fused_ops.py (XLA kernels for bias + GELU and bias + residual + LayerNorm, oneDNN's
fused LayerNorm, chosen at trace time), precision.py (float32 / bf16 / fp16 and the
`auto` choice from the CPU's measured GEMM rates).

May import: albert_tf.errors, albert_tf.config.
"""
