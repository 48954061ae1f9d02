"""The pairing now lives in `albert_tf.instances.pairing` (the Keras masked LM uses it too);
this module keeps the old import path."""
from albert_tf.instances.pairing import *  # noqa: F401,F403
from albert_tf.instances.pairing import (  # noqa: F401
    DocView, Pair, create_pairs, doc_view_from_sentences, truncate_bounds)
