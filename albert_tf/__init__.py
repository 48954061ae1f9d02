"""albert-tf: ALBERT (A Lite BERT) for TensorFlow 2 / Keras 3."""
