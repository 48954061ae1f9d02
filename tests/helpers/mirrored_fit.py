"""Fits three Keras tasks on one device and under a MirroredStrategy over two logical CPUs
(one strategy object: several in one process clash in their collective keys), then prints
the largest weight difference of each as JSON. argv: the classifier, NER and SQuAD
source directories (Hugging Face)."""
import json
import sys

import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

import keras  # noqa: E402
import numpy as np  # noqa: E402

import albert_tf  # noqa: E402

NER_LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]
WORDS = [["Alice", "lives", "in", "Paris", "."], ["EU", "rejects", "German", "lamb", "."],
         ["Bob", "left", "."], ["Ann", "is", "here"]]
TAGS = [["B-PER", "O", "O", "B-LOC", "O"], ["B-ORG", "O", "B-LOC", "O", "O"],
        ["B-PER", "O", "O"], ["B-PER", "O", "O"]]
CONTEXT = "The Eiffel Tower was built in 1889 by Gustave Eiffel in Paris."


def tasks(classifier_dir, ner_dir, qa_dir):
    """name -> (build, x, y): dropout 0, so the two runs can be compared."""
    questions = {"question": ["When was it built?", "Who built it?"] * 2,
                 "context": [CONTEXT] * 4}
    return {
        "classifier": (lambda: albert_tf.from_pretrained(classifier_dir, sequence_length=16,
                                                         dropout=0.0),
                       ["a good film", "a bad film", "good, very good", "bad and boring"],
                       np.array([1, 0, 1, 0])),
        "tagger_crf": (lambda: albert_tf.from_pretrained(
            ner_dir, "token-classification", labels=NER_LABELS, sequence_length=16,
            use_crf=True, dropout=0.0), WORDS, TAGS),
        "squad_v2": (lambda: albert_tf.from_pretrained(
            qa_dir, "question-answering", sequence_length=48, version_2_with_negative=True,
            dropout=0.0), questions, ["1889", "Gustave Eiffel", "", "Gustave Eiffel"]),
    }


def main():
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    found = {}
    for name, (build, x, y) in tasks(*sys.argv[1:4]).items():
        weights = []
        for scope in (tf.distribute.get_strategy().scope(), strategy.scope()):
            keras.utils.set_random_seed(0)
            with scope:
                model = build()
                model.compile(learning_rate=1e-3)
            model.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0)
            weights.append([w.numpy() for w in model.network.weights])
        found[name] = max(float(np.abs(a - b).max()) for a, b in zip(*weights))
    print(json.dumps(found))


if __name__ == "__main__":
    main()
