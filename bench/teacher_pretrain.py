"""Pretrains the light-inference benchmark's teacher: demo.py's recipe on the shared books,
but six applications of the shared layer (the demo's two leave nothing to exit early from).

  python bench/teacher_pretrain.py --output_dir /tmp/teacher [--pretrain_minutes 35]

The output is demo.py's: an official-style model directory (albert_config.json, demo.model,
model.ckpt-best.*) that `bench/light_inference.py --init_dir` fine-tunes from.
"""
import argparse
import dataclasses
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from albert_tf.kernels import onednn  # noqa: E402

onednn.configure()

import demo  # noqa: E402

LAYERS = 6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--pretrain_minutes", type=float, default=35.0)
    parser.add_argument("--num_train_steps", type=int, default=0)
    args = parser.parse_args()
    from absl import logging
    logging.set_verbosity(logging.INFO)
    cfg = dataclasses.replace(demo.DemoConfig(), num_hidden_layers=LAYERS,
                              pretrain_minutes=args.pretrain_minutes,
                              num_train_steps=args.num_train_steps, evaluations=4)
    demo.run(cfg, args.output_dir, "standard")


if __name__ == "__main__":
    main()
