"""Runs transformers' pipelines (torch, CPU) on the cases of a JSON file; prints the results.

    .venv-oracle/bin/python tests/helpers/hf_pipeline_oracle.py cases.json > results.json

cases.json: [{"task": ..., "model": DIR, "inputs": ..., "kwargs": {...}, "init": {...}}].
A separate program in its own venv (torch + transformers 4.57, no TensorFlow): the oracle
that tests/pipelines/test_transformers_oracle.py compares albert-tf's pipelines with.
"""
import json
import sys
import warnings

import numpy as np


def plain(value):
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def multiple_choice(case):
    """AlbertForMultipleChoice's softmax over the choices of (question, choice) pairs."""
    import torch
    import transformers

    model = transformers.AlbertForMultipleChoice.from_pretrained(case["model"]).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(case["model"])
    question, choices = case["inputs"]["question"], case["inputs"]["choices"]
    encoded = tokenizer([question] * len(choices), choices, padding=True, return_tensors="pt")
    with torch.no_grad():
        logits = model(**{k: v.unsqueeze(0) for k, v in encoded.items()}).logits[0]
    scores = torch.softmax(logits.double(), -1).tolist()
    order = sorted(range(len(choices)), key=lambda i: -scores[i])
    return [{"index": i, "choice": choices[i], "score": scores[i]} for i in order]


def main(path):
    import transformers

    warnings.simplefilter("ignore")
    transformers.logging.set_verbosity_error()
    with open(path) as handle:
        cases = json.load(handle)
    loaded, results = {}, []
    for case in cases:
        if case["task"] == "multiple-choice":  # no transformers pipeline: the model itself
            results.append(multiple_choice(case))
            continue
        if case["task"] == "tokenize":  # the fast and the slow (sentencepiece) tokenizers' ids
            fast = transformers.AutoTokenizer.from_pretrained(case["model"])
            slow = transformers.AutoTokenizer.from_pretrained(case["model"], use_fast=False)
            results.append({"fast": [fast(t)["input_ids"] for t in case["inputs"]],
                            "slow": [slow(t)["input_ids"] for t in case["inputs"]]})
            continue
        key = (case["task"], case["model"])
        if key not in loaded:
            loaded[key] = transformers.pipeline(case["task"], model=case["model"],
                                                tokenizer=case["model"], framework="pt",
                                                device=-1, **case.get("init", {}))
        runner = loaded[key]
        inputs = case["inputs"]
        if isinstance(inputs, dict) and case["task"] in ("question-answering",):
            results.append(plain(runner(**inputs, **case["kwargs"])))
        else:
            results.append(plain(runner(inputs, **case["kwargs"])))
    json.dump({"transformers": transformers.__version__, "results": results}, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1])
