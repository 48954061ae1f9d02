r"""Train ALBERT sentence embeddings (sentence-transformers' way) and serve them.

--task_name: sts-b (GLUE's STS-B TSV files), lcqmc (Chinese pairs labelled 0/1, LCQMC /
ATEC layout) or custom ({split}.tsv / .csv with --text_a_column, --text_b_column,
--label_column, --negative_column; or {split}.txt, one text per line). --pooling (cls, max,
mean, mean_sqrt_len; comma-separated: concatenated) and --normalize shape the vector;
--loss: cosent (pairs with scores), ranking (pairs or triplets, in-batch negatives), simcse
(single texts, unsupervised; auto chooses by the data). Every checkpoint is evaluated on
the dev pairs: Spearman (the best-checkpoint metric) and Pearson of the cosine similarities
against the gold scores, as sentence-transformers' EmbeddingSimilarityEvaluator.

Example:
  python run_embeddings.py --task_name=sts-b --data_dir=glue \
    --albert_config_file=albert_base_v2/albert_config.json \
    --spm_model_file=albert_base_v2/30k-clean.model --init_checkpoint=albert_base_v2 \
    --output_dir=runs/sts --do_train --do_eval --max_seq_length=128 --train_batch_size=16 \
    --learning_rate=2e-5 --num_train_epochs=4 --export_dir=runs/sts/export
Outputs: eval_results.txt (spearman, pearson), model.ckpt-best.*, similarities.tsv and
test_metrics.json (--do_predict), and in --export_dir the SavedModel (text -> embedding),
model.onnx / model.tflite (--export_format) and sentence-transformers/ (loads in
sentence_transformers.SentenceTransformer). albert_tf.pipeline("sentence-embedding",
model=EXPORT_DIR) embeds texts.
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from albert_tf.kernels import onednn  # noqa: E402

onednn.configure()  # before TensorFlow is imported: it reads the oneDNN switch once

from absl import flags  # noqa: E402

from albert_tf import cli, cli_finetuning, cli_options  # noqa: E402
from albert_tf.tasks.embeddings.job import EmbeddingJob  # noqa: E402

FLAGS = flags.FLAGS
cli_finetuning.define_flags(EmbeddingJob)
for module in (cli_options, cli_finetuning, cli):
    flags.adopt_module_key_flags(module)  # list them in --help

if __name__ == "__main__":
    cli.run(cli_finetuning.main(EmbeddingJob),
            interrupted=lambda: cli.resume_hint(FLAGS.output_dir))
