r"""Fine-tune ALBERT for named-entity recognition (token classification).

Tasks (--task_name): conll2003 (eng.train/eng.testa/eng.testb or train.txt/valid.txt/
test.txt, 4 columns, IOB1 or IOB2 as they come), cluener (CLUENER2020's
{train,dev,test}.json), msra (one character and its tag per line: {train,dev,test}.txt)
and custom ({train,dev,test}.{txt,tsv,conll} column files with --token_column,
--label_column, --delimiter, or .json/.jsonl lines with character spans). A word's label
goes on its first sub-token; long sentences are split into overlapping windows
(--doc_stride) and each word is predicted from the window where it has most context.
--use_crf adds a linear-chain CRF; decoding keeps to the tag scheme unless
--noconstrain_decoding. Entity F1 is seqeval's (default mode).

Example:
  python run_ner.py --task_name=conll2003 --data_dir=conll2003 \
    --albert_config_file=albert_base/albert_config.json \
    --spm_model_file=albert_base/30k-clean.model --init_checkpoint=albert_base \
    --output_dir=runs/conll --max_seq_length=128 --train_batch_size=32 \
    --learning_rate=5e-5 --train_step=3000 --warmup_step=300 --do_train --do_eval --do_predict
  python run_ner.py --task_name=cluener --data_dir=cluener --use_crf \
    --albert_config_file=albert_base_zh/albert_config.json \
    --vocab_file=albert_base_zh/vocab_chinese.txt --init_checkpoint=albert_base_zh \
    --output_dir=runs/cluener --do_train --do_eval --do_predict --predict_split=test
Outputs: eval_results.txt (f1, precision, recall, token_accuracy, and per type),
model.ckpt-best.*, labels.txt, predictions.txt (column formats: word gold predicted) or
cluener_predict.json (CLUE's submission format) or entities.jsonl, predict_results.json.
--export_dir writes the best weights as a SavedModel (`serving_default`: raw text ->
entities with character offsets; `serve_tokens`: token ids -> tag ids) and/or model.onnx
(logits; `albert_tf.tasks.tagging.export.decode_onnx_logits` decodes them), as
--export_format says.
Score a predictions file: python -m albert_tf.tasks.tagging evaluate --task_name ...
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from albert_tf.kernels import onednn  # noqa: E402

onednn.configure()  # before TensorFlow is imported: it reads the oneDNN switch once

from absl import flags  # noqa: E402

from albert_tf import cli, cli_finetuning, cli_options  # noqa: E402
from albert_tf.tasks.tagging.job import TaggingJob  # noqa: E402

FLAGS = flags.FLAGS
cli_finetuning.define_flags(TaggingJob)
for module in (cli_options, cli_finetuning, cli):
    flags.adopt_module_key_flags(module)  # list them in --help

if __name__ == "__main__":
    cli.run(cli_finetuning.main(TaggingJob),
            interrupted=lambda: cli.resume_hint(FLAGS.output_dir))
