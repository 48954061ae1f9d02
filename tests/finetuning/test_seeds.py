"""Multi-seed fine-tuning (median and best of N, export of the best, resume at the seed an
interruption stopped in), --num_train_epochs, and --deterministic repeating bit for bit."""
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.finetuning import run_seeds, seeds as seeds_module
from albert_tf.tasks.classification.job import ClassificationJob
from tests.cli.test_run_classifier_cli import glue_options, run_cli, sst2  # noqa: F401 (fixture)


def options_for(sst2, output_dir, **changes):  # noqa: F811
    """Tiny SST-2 options; `changes` of run fields (FinetuningOptions) or task fields."""
    import dataclasses

    from albert_tf.finetuning import FinetuningOptions

    run_fields = {field.name for field in dataclasses.fields(FinetuningOptions)}
    values = dict(output_dir=str(output_dir), do_train=True, do_eval=True,
                  train_batch_size=16, learning_rate=1e-3, train_step=20, warmup_step=2,
                  save_checkpoints_steps=10, iterations_per_loop=10)
    values.update({k: v for k, v in changes.items() if k in run_fields})
    return glue_options(sst2, output_dir, eval_batch_size=16,
                        finetuning=FinetuningOptions(**values),
                        **{k: v for k, v in changes.items() if k not in run_fields})


class InterruptedJob(ClassificationJob):
    """Interrupted (Ctrl-C) at its second evaluation when its seed is `INTERRUPT_SEED`."""

    INTERRUPT_SEED = None

    def evaluate(self, model, step):
        self.calls = getattr(self, "calls", 0) + 1
        if self.options.seed == self.INTERRUPT_SEED and self.calls == 2:
            raise KeyboardInterrupt
        return super().evaluate(model, step)


@pytest.mark.slow  # ~20 s: three fine-tunings
def test_three_seeds_report_the_median_and_export_the_best(sst2, tmp_path):  # noqa: F811
    out = tmp_path / "run"
    options = options_for(sst2, out, export_dir=str(tmp_path / "export"),
                          export_format=("saved_model",))
    summary = run_seeds(ClassificationJob, options, [1, 2, 3])
    values = [record["value"] for record in summary["seeds"]]
    assert [record["seed"] for record in summary["seeds"]] == [1, 2, 3]
    assert summary["median"] == sorted(values)[1]
    best = max(summary["seeds"], key=lambda record: record["value"])
    assert summary["best_seed"] == best["seed"] and summary["best_value"] == best["value"]
    for record in summary["seeds"]:
        with open(os.path.join(out, f"seed_{record['seed']}", "best_eval.json")) as handle:
            assert json.load(handle)["eval_accuracy"] == record["value"]
    # The features were built once, in the parent directory.
    assert not any(name.endswith(".tf_record") for seed in (1, 2, 3)
                   for name in os.listdir(out / f"seed_{seed}"))
    with open(out / "seed_results.json") as handle:
        assert json.load(handle)["median"] == summary["median"]
    # The export holds the best seed's weights (its classifier's, compared as tensors).
    exported = tf.train.load_checkpoint(str(tmp_path / "export" / "variables" / "variables"))
    exported = [exported.get_tensor(key) for key in exported.get_variable_to_shape_map()
                if not key.startswith("_")]
    for record in summary["seeds"]:
        reader = tf.train.load_checkpoint(str(out / f"seed_{record['seed']}" /
                                              "model.ckpt-best"))
        kernel = reader.get_tensor("output_weights")  # the original's [labels, hidden]
        found = any(t.shape in (kernel.shape, kernel.T.shape) and
                    (np.array_equal(t, kernel) or np.array_equal(t, kernel.T))
                    for t in exported)
        assert found == (record["seed"] == best["seed"]), record


@pytest.mark.slow  # ~20 s: three fine-tunings
def test_an_interrupted_multi_seed_run_resumes_at_its_seed(sst2, tmp_path, caplog):  # noqa: F811
    out = tmp_path / "run"
    InterruptedJob.INTERRUPT_SEED = 2
    with pytest.raises(KeyboardInterrupt):
        run_seeds(InterruptedJob, options_for(sst2, out), [1, 2, 3])
    assert os.path.exists(out / "seed_1" / seeds_module.SEED_RESULT)
    assert not os.path.exists(out / "seed_2" / seeds_module.SEED_RESULT)
    assert not os.path.exists(out / "seed_3")
    seed_1 = (out / "seed_1" / seeds_module.SEED_RESULT).read_text()
    InterruptedJob.INTERRUPT_SEED = None
    caplog.set_level("INFO", logger="absl")
    summary = run_seeds(InterruptedJob, options_for(sst2, out), [1, 2, 3])
    assert len(summary["seeds"]) == 3
    assert "seed 1 (1 of 3): finished earlier" in caplog.text
    assert "resumed from" in caplog.text and "seed_2" in caplog.text
    assert (out / "seed_1" / seeds_module.SEED_RESULT).read_text() == seed_1
    # A rerun with other settings would mix them in one median: refused, naming them.
    from albert_tf.errors import UserValueError

    with pytest.raises(UserValueError, match=r"seed_1 finished with other settings: "
                       r"--learning_rate 0\.001 \(now 0\.002\); give another --output_dir"):
        run_seeds(ClassificationJob, options_for(sst2, out, learning_rate=2e-3), [1, 2, 3])


def test_a_multi_seed_run_without_evaluation_is_refused(sst2, tmp_path):  # noqa: F811
    from albert_tf.errors import UserValueError

    with pytest.raises(UserValueError, match=r"^--num_seeds / --seeds: a multi-seed run "
                       r"compares the seeds on the dev set: it needs --do_eval"):
        run_seeds(ClassificationJob, options_for(sst2, tmp_path, do_eval=False), [1, 2])
    assert not (tmp_path / "seed_1").exists()


def test_num_train_epochs_gives_the_steps(sst2, tmp_path, caplog):  # noqa: F811
    options = options_for(sst2, tmp_path, train_step=1000, warmup_step=0,
                          num_train_epochs=0.5, warmup_proportion=0.25)
    job = ClassificationJob(options)
    caplog.set_level("INFO", logger="absl")
    job.run()
    # 320 training rows / batch 16 x 0.5 epochs = 10 steps, warmup int(10 x 0.25) = 2
    assert job.results["global_step"] == 10
    assert job.finetuning_options().warmup_step == 2


@pytest.mark.slow  # two CLI runs, ~40 s
def test_deterministic_runs_repeat_bit_for_bit(sst2, tmp_path):  # noqa: F811
    tensors = []
    for name in ("a", "b"):
        done = run_cli(sst2, tmp_path / name, do_train=True, do_eval=False, deterministic=True,
                       train_step=20, seed=5, classifier_dropout=0.3)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "TensorFlow op determinism on, seed 5" in done.stderr
        reader = tf.train.load_checkpoint(str(tmp_path / name / "model.ckpt-best"))
        tensors.append({key: reader.get_tensor(key)
                        for key in reader.get_variable_to_shape_map()})
    assert tensors[0].keys() == tensors[1].keys()
    for key in tensors[0]:
        np.testing.assert_array_equal(tensors[0][key], tensors[1][key], err_msg=key)


def test_each_seed_runs_without_export_and_shares_the_caches(sst2, tmp_path):  # noqa: F811
    options = options_for(sst2, tmp_path, export_dir=str(tmp_path / "export"),
                          export_format=("saved_model", "onnx"), export_int8=True)
    seed = seeds_module._seed_options(options, 7)
    assert (seed.output_dir, seed.seed, seed.cached_dir) == (
        str(tmp_path / "seed_7"), 7, str(tmp_path))
    assert seed.export_dir is None and not seed.export_int8
    seed.validate(1)  # a seed's options pass the checks its job runs


class DivergingJob(ClassificationJob):
    """The guard stops seed 2 (as a run diverging past --max_rollbacks would)."""

    def run(self):
        from albert_tf.training import DivergenceError

        if self.options.seed == 2:
            raise DivergenceError("training diverged at step 3: the loss became NaN; stopping")
        return super().run()


@pytest.mark.slow  # 8 s
def test_a_diverged_seed_is_recorded_and_the_others_run_on(sst2, tmp_path, caplog):  # noqa: F811
    caplog.set_level("INFO", logger="absl")
    summary = run_seeds(DivergingJob, options_for(sst2, tmp_path), [2, 1])
    assert summary["diverged"] == 1 and summary["best_seed"] == 1
    assert summary["median"] == summary["seeds"][1]["value"]
    with open(tmp_path / "seed_2" / seeds_module.SEED_RESULT) as handle:
        assert json.load(handle)["value"] is None
    assert "seed 2: diverged (training diverged at step 3" in caplog.text
    assert "2 seeds (1 diverged): median eval_accuracy" in caplog.text
    from albert_tf.training import DivergenceError

    with pytest.raises(DivergenceError, match="^all 1 seeds diverged"):
        run_seeds(DivergingJob, options_for(sst2, tmp_path), [2])  # recorded: not rerun
