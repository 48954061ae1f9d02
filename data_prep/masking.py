"""The masking now lives in `albert_tf.instances.masking` (the Keras masked LM uses it too);
this module keeps the old import path."""
from albert_tf.instances.masking import *  # noqa: F401,F403
from albert_tf.instances.masking import MaskingOptions, MaskStats, mask_pair  # noqa: F401
