"""The benchmark harness (bench/): FLOP formulas, ratios, and one tiny end-to-end run."""
import json
import pathlib
import subprocess
import sys

import pytest

from albert_tf import AlbertConfig
from albert_tf.kernels import onednn, precision
from tests.conftest import REPO_ROOT

sys.path.insert(0, str(pathlib.Path(REPO_ROOT) / "bench"))
import ab  # noqa: E402
import flops  # noqa: E402
import op_profile  # noqa: E402
import run as bench_run  # noqa: E402
import targets  # noqa: E402


@pytest.mark.parametrize("name,preset", [("base", "albert_base_v2"), ("large", "albert_large_v2")])
def test_bench_models_are_the_official_shapes(name, preset):
    config = AlbertConfig.from_preset(preset).to_dict()
    for key, value in bench_run.MODELS[name].items():
        assert config[key] == value, key


def test_flop_count_of_albert_base_by_hand():
    model = bench_run.MODELS["base"]
    tokens = 16 * 128
    per_layer = (4 * 2 * tokens * 768 * 768 + 2 * 2 * 16 * 128 * 128 * 768
                 + 2 * 2 * tokens * 768 * 3072)
    encoder = 2 * tokens * 128 * 768 + 12 * per_layer + 2 * 16 * 768 * 768
    assert flops.encoder_forward_flops(model, 16, 128) == encoder
    head = 2 * 320 * 768 * 128 + 2 * 320 * 128 * 30000 + 2 * 16 * 768 * 2
    assert flops.training_step_flops(model, 16, 128, 20) == 3 * (encoder + head)
    # ~1.08 TFLOP per step: the figure the issue's peak fractions are based on.
    assert 1.05e12 < flops.training_step_flops(model, 16, 128, 20) < 1.1e12
    # Sharing does not change the arithmetic; inner groups multiply the layers.
    assert flops.encoder_forward_flops(dict(model, inner_group_num=2), 1, 8) > \
        flops.encoder_forward_flops(model, 1, 8)


def test_bf16_rows_only_where_bf16_is_native():
    names = [row.name for row in bench_run.suite_rows("full", bf16=False)]
    assert [n for n in names if "bf16" in n] == ["probe bf16"]  # the probe shows emulation
    assert "train base s128 b16 fp32" in names and "train large s512 b2 fp32" in names
    with_bf16 = [row.name for row in bench_run.suite_rows("full", bf16=True)]
    assert "train base s128 b16 bf16" in with_bf16 and len(with_bf16) > len(names)


def test_speedup_is_against_the_fastest_peer_and_skips_missing_ones():
    row = bench_run.Row("r", {"kind": "train"}, bench_run.FRAMEWORKS, 1, "s/step")
    results = {"ours": {"status": "ok", "unit_seconds": 2.0},
               "keras_hub": {"status": "ok", "unit_seconds": 3.0},
               "hf": {"status": "ok", "unit_seconds": 2.5}}
    assert bench_run.speedup(row, results) == {"fastest_peer": "hf", "ratio": 1.25}
    results["hf"] = {"status": "n/a", "reason": "not installed"}
    assert bench_run.speedup(row, results)["fastest_peer"] == "keras_hub"
    results["keras_hub"] = {"status": "n/a", "reason": "not installed"}
    assert bench_run.speedup(row, results) is None


def test_the_probe_runs_inside_the_rows_read_against_it():
    rows = bench_run.suite_rows("quick", bf16=True)
    with_probe = {row.name for row in rows if targets.reads_probe(row.case)}
    assert with_probe == {"train base s128 b16 fp32", "infer base s128 b32 in-process fp32",
                          "infer base s128 b32 SavedModel fp32"}


def test_bf16_probe_is_not_started_under_an_isa_cap_without_bf16(monkeypatch, tmp_path):
    """oneDNN aborts the worker on a bf16 GEMM under ONEDNN_MAX_CPU_ISA=AVX2: the row
    says why instead of starting it (and printing an ERROR)."""
    probe = [r for r in bench_run.suite_rows("quick", tiny=True) if r.name == "probe bf16"][0]
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "avx2")
    lines = []
    results = bench_run.run_row(probe, 1, bench_run.FRAMEWORKS, tmp_path, "/nonexistent",
                                log=lines.append)
    assert results == {"ours": {"status": "n/a", "reason": "ONEDNN_MAX_CPU_ISA=AVX2 stops "
                                "oneDNN below its bf16 instructions"}}
    assert lines == ["  albert-tf: n/a (ONEDNN_MAX_CPU_ISA=AVX2 stops oneDNN below its bf16 "
                     "instructions)"]
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_BF16")
    assert bench_run.precision.onednn_cap_below_bf16() is None


def test_rounds_below_one_are_refused(capsys):
    with pytest.raises(SystemExit) as exit_info:
        bench_run.main(["--tiny", "--rounds", "0"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip().endswith("error: --rounds must be at least 1; got 0")


def test_only_that_names_no_row_is_refused_with_the_rows(capsys):
    with pytest.raises(SystemExit) as exit_info:
        bench_run.main(["--tiny", "--bf16", "never", "--only", "trian"])
    assert exit_info.value.code == 2
    message = capsys.readouterr().err.strip().splitlines()[-1]
    assert message.split(": ", 1)[1].startswith(
        "error: --only 'trian' names no row of the quick suite without bf16 rows; its rows: "
        "train tiny s16 b16 fp32, ")


def test_union_of_kernel_intervals_counts_overlaps_once():
    ps = 10 ** 12  # intervals in picoseconds
    assert op_profile.union_seconds([]) == 0.0
    assert op_profile.union_seconds([(0, 2 * ps), (1 * ps, 3 * ps), (5 * ps, 6 * ps)]) == 4.0
    assert op_profile.union_seconds([(5 * ps, 6 * ps), (0, 10 * ps)]) == 10.0
    assert op_profile.is_matmul("_MklNativeFusedMatMul") and op_profile.is_matmul("BatchMatMulV2")
    assert not op_profile.is_matmul("Softmax")


def test_a_trace_times_the_products_apart_from_the_other_ops():
    import tensorflow as tf
    a, w = tf.random.normal([512, 512]), tf.random.normal([512, 512])

    @tf.function
    def unit():
        product = tf.matmul(a, w)
        # Elementwise work after the product, about as long as it (not a matmul).
        for _ in range(20):
            product = tf.tanh(product) * 1.01
        return product
    unit()
    measured = op_profile.matmul_seconds(lambda: unit().numpy(), 3)
    assert 0 < measured["matmul_seconds"] < measured["unit_seconds"]
    assert measured["matmul_types"] and all("MatMul" in t for t in measured["matmul_types"])


def _train_results(ratio_peer_seconds, fraction, matmul_fraction):
    ours = {"status": "ok", "unit_seconds": 1.0, "fraction_of_peak": fraction}
    if matmul_fraction is not None:
        ours["matmul_fraction_of_peak"] = matmul_fraction
    return ({"ours": ours, "keras_hub": {"status": "ok", "unit_seconds": ratio_peer_seconds}},
            {"fastest_peer": "keras_hub", "ratio": ratio_peer_seconds, "paired_ratio":
             ratio_peer_seconds})


def test_targets_per_row_read_the_paired_ratio_and_the_probe_fractions():
    train = bench_run.model_case("train", "tiny", 16, 16, "float32")
    check = targets.row_check("train", train, *_train_results(1.12, 0.7, 0.9))
    assert check.ok and check.text() == ("ok: 1.12x, products at 90% of the probe "
                                          "(target >= 1.10x, products >= 85%)")
    assert not targets.row_check("train", train, *_train_results(1.12, 0.7, 0.8)).ok
    assert not targets.row_check("train", train, *_train_results(1.05, 0.7, 0.9)).ok
    missing = targets.row_check("train", train, *_train_results(1.2, 0.7, None))
    assert not missing.ok and "products' rate not measured" in missing.measured
    b32 = bench_run.model_case("infer", "tiny", 16, 32, "float32", mode="saved_model")
    assert targets.row_check("b32", b32, *_train_results(1.0, 0.91, None)).ok
    miss = targets.row_check("b32", b32, *_train_results(1.3, 0.89, None))
    assert miss.text() == "MISS: 89% of the probe, 1.30x (target >= 90% of the probe, >= 1.00x)"
    int8 = bench_run.model_case("infer", "tiny", 16, 1, "int8", mode="onnx")
    assert not targets.row_check("int8", int8, *_train_results(0.97, None, None)).ok
    # No target of their own: XLA, bf16, LiteRT and batch-1 float32 rows.
    for case in (bench_run.model_case("train", "tiny", 16, 16, "float32", jit=True),
                 bench_run.model_case("train", "tiny", 16, 16, "mixed_bfloat16"),
                 bench_run.model_case("infer", "tiny", 16, 1, "float32", mode="litert"),
                 bench_run.model_case("infer", "tiny", 16, 1, "float32")):
        assert targets.row_check("r", case, *_train_results(0.5, 0.1, 0.1)) is None


def test_median_interval_is_the_binomial_order_statistics():
    """90%: n=6 -> x(1)..x(6) (2 P(B<1) = 1/32 <= 0.10, 2 P(B<2) = 7/32 > 0.10);
    n=24 -> x(8)..x(17) (2 P(B<=7) = 0.064, 2 P(B<=8) = 0.152); n=4 -> none."""
    values = [1.09, 1.02, 1.15, 1.07, 1.11, 0.98]
    assert targets.median_interval(values) == (0.98, 1.15)
    many = [1.0 + i / 100 for i in range(24)][::-1]
    assert targets.median_interval(many) == pytest.approx((1.07, 1.16))
    assert targets.median_interval(values[:4]) is None
    assert targets.median_interval(values[:4], confidence=0.80) == (1.02, 1.15)
    # The check's text carries it where the row has one.
    train = bench_run.model_case("train", "tiny", 16, 16, "float32")
    results, ratio = _train_results(1.09, 0.9, 0.9)
    ratio.update(paired_interval=[1.04, 1.13], pairs=6)
    assert targets.row_check("train", train, results, ratio).text() == (
        "MISS: 1.09x (90% interval 1.04-1.13, 6 pairs), products at 90% of the probe "
        "(target >= 1.10x, products >= 85%)")


def test_batch1_target_compares_the_fastest_paths_across_rows():
    def row(name, mode, precision="float32", **values):
        return {"row": name, "case": bench_run.model_case("infer", "tiny", 16, 1, precision,
                                                          mode=mode),
                "results": {f: {"status": "ok", "value": v} for f, v in values.items()}}
    rows = [row("in-process", "in_process", ours=130.0, keras_hub=140.0, hf_ort=125.0),
            row("SavedModel", "saved_model", ours=131.0, hf_ort=124.0),
            row("ONNX", "onnx", ours=123.0, hf_ort=126.0),
            row("ONNX int8", "onnx", "int8", ours=40.0, hf_ort=45.0),  # not float32
            row("LiteRT", "litert", ours=121.0, ours_ort=127.0)]
    check = targets.fastest_batch1_path(rows, bench_run.PEER_LABELS)
    assert check.ok and check.measured == (
        "albert-tf (LiteRT) 121.0 ms against HF ONNX Runtime (SavedModel) 124.0 ms: 1.02x")
    slower = targets.fastest_batch1_path(rows[:2], bench_run.PEER_LABELS)
    assert not slower.ok and slower.measured.startswith("albert-tf (in-process) 130.0 ms")
    assert targets.fastest_batch1_path(rows[4:], bench_run.PEER_LABELS) is None  # no peer


def test_paired_ratio_is_the_median_of_the_per_unit_ratios():
    """Round 2 slowed ours, round 3 the peer: the ratio of medians takes the slowed
    rounds in, the median of the ratios of units run back to back does not; latency
    rows likewise; results without unit times, or with unequal rounds (hand-merged),
    give no paired ratio."""
    row = bench_run.Row("r", {"kind": "step", "batch_size": 16}, bench_run.FRAMEWORKS, 2,
                        "s/step")
    ours = bench_run.summarize(row, [[2.0, 2.0], [3.0, 3.0], [2.0, 2.0]], 0.0)
    peer = bench_run.summarize(row, [[2.4, 2.4], [3.6, 3.6], [4.0, 4.0]], 0.0)
    ratio = bench_run.speedup(row, {"ours": ours, "keras_hub": peer})
    assert ratio["ratio"] == pytest.approx(3.6 / 2.0)
    assert ratio["paired_ratio"] == pytest.approx(1.2) and ratio["pairs"] == 6
    assert ratio["paired_interval"] == pytest.approx([1.2, 2.0])  # x(1), x(6) of 6
    # Latency: ours 10 ms with one 200 ms hiccup per round, the peer a steady 12 ms.
    latency = bench_run.Row("l", {"kind": "latency"}, bench_run.FRAMEWORKS, 5, "ms")
    ours = bench_run.summarize(latency, [[0.010] * 4 + [0.200]] * 3, 0.0)
    peer = bench_run.summarize(latency, [[0.012] * 5] * 3, 0.0)
    ratio = bench_run.speedup(latency, {"ours": ours, "keras_hub": peer})
    assert ratio["ratio"] == pytest.approx(1.2)
    assert ratio["paired_ratio"] == pytest.approx(1.2)
    peer["windows"] = peer["windows"][:1]
    assert "paired_ratio" not in bench_run.speedup(latency, {"ours": ours, "keras_hub": peer})
    del peer["windows"]
    assert "paired_ratio" not in bench_run.speedup(latency, {"ours": ours, "keras_hub": peer})


class _FakeWorker:
    """Records the order of measurements; unit seconds = the unit's place in that order."""

    def __init__(self, framework, calls):
        self.framework, self._calls = framework, calls

    def measure(self, units):
        start = len(self._calls)
        self._calls.extend([self.framework] * units)
        return [float(start + i) for i in range(units)]


def test_interleave_alternates_single_units_with_a_rotating_first_place():
    calls = []
    workers = [_FakeWorker(name, calls) for name in ("ours", "keras_hub", "hf")]
    windows = bench_run.interleave(workers, rounds=2, units=3)
    cycle = ["ours", "keras_hub", "hf", "keras_hub", "hf", "ours", "hf", "ours", "keras_hub"]
    assert calls == cycle * 2
    assert {name: [len(w) for w in rounds] for name, rounds in windows.items()} == \
        {"ours": [3, 3], "keras_hub": [3, 3], "hf": [3, 3]}
    # Paired units ran in the same cycle: at most two places apart.
    for own, peer in zip(sum(windows["ours"], []), sum(windows["hf"], [])):
        assert abs(own - peer) <= 2
    # One worker (the reader row): whole rounds, one request each.
    calls.clear()
    alone = bench_run.interleave([_FakeWorker("ours", calls)], rounds=2, units=4)
    assert [len(w) for w in alone["ours"]] == [4, 4] and len(calls) == 8


def test_summary_takes_the_median_window_and_latency_the_median_call():
    case = {"kind": "infer", "batch_size": 4, "seq_length": 8,
            "model": bench_run.MODELS["base"]}
    throughput = bench_run.summarize(bench_run.Row("t", case, (), 2, "seq/s"),
                                     [[1.0, 3.0], [2.0, 2.0], [9.0, 9.0]], 0.0)
    assert throughput["unit_seconds"] == 2.0 and throughput["value"] == 2.0
    latency = bench_run.summarize(bench_run.Row("l", case, (), 2, "ms"),
                                  [[0.001, 0.003], [0.002, 0.100]], 0.0)
    assert latency["value"] == pytest.approx(2.5)


@pytest.mark.slow  # ~30-40 s: keeps the default suite well inside 10 minutes
def test_tiny_run_end_to_end(tmp_path):
    """Ours on a 2-layer model, one round; a peer that is not installed shows as n/a."""
    output = tmp_path / "bench.jsonl"
    markdown = tmp_path / "bench.md"
    has_keras_hub = subprocess.run([sys.executable, "-c", "import keras_hub"],
                                   capture_output=True).returncode == 0
    result = subprocess.run(
        [sys.executable, "bench/run.py", "--tiny", "--skip_data", "--rounds", "1",
         "--frameworks", "ours,keras_hub", "--only",
         "train tiny s16 b16 fp32,b1 in-process fp32,b1 ONNX Runtime",
         f"--output={output}", f"--markdown={markdown}"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    records = [json.loads(line) for line in output.read_text().splitlines()]
    machine = records[0]
    assert machine["record"] == "machine" and machine["cpus"] >= 1
    cpu = precision.read_cpu_info()
    assert machine["cpu"] == cpu.name and machine["cpu_flags"] == cpu.shown_flags()
    header = result.stdout.splitlines()[1:4]
    assert header[0].startswith(f"CPU: {cpu.name}, ") and f"flags: {cpu.shown_flags()}" in header[0]
    assert header[1] == f"albert-tf's workers: {machine['onednn']}"
    assert machine["onednn"].startswith("oneDNN on" if onednn.choose(cpu).on else "oneDNN off")
    assert header[2].startswith("bf16: auto picks it" if machine["native_bf16"]
                                else "bf16: auto keeps float32")
    results = {(r["row"], r["framework"]): r for r in records if r["record"] == "result"}
    assert {row for row, _ in results} == {"probe fp32", "probe bf16", "train tiny s16 b16 fp32",
                                           "train tiny s16 b16 fp32 xla",
                                           "infer tiny s16 b1 in-process fp32",
                                           "infer tiny s16 b1 ONNX Runtime fp32",
                                           "infer tiny s16 b1 ONNX Runtime int8"}
    train = results[("train tiny s16 b16 fp32", "ours")]
    assert train["status"] == "ok" and train["unit_seconds"] > 0
    assert 0 < train["fraction_of_peak"] < 1
    assert train["gflop_per_unit"] == pytest.approx(flops.case_flops(train["case"]) / 1e9)
    # The fraction is read against the probe timed inside the row, between its units.
    probe = results[("train tiny s16 b16 fp32", "probe")]
    assert probe["status"] == "ok" and probe["value"] > 1.0  # GFLOP/s
    assert train["fraction_of_peak"] == pytest.approx(
        train["gflop_per_unit"] / train["unit_seconds"] / probe["value"])
    # The products' rate from a trace of the step: faster than the whole step's.
    assert 0 < train["matmul"]["matmul_seconds"] < train["matmul"]["unit_seconds"]
    assert train["matmul_fraction_of_peak"] > train["fraction_of_peak"]
    checks = {r["row"]: r for r in records if r["record"] == "target"}
    assert set(checks) >= {"train tiny s16 b16 fp32", "infer tiny s16 b1 ONNX Runtime int8"}
    infer = results[("infer tiny s16 b1 in-process fp32", "ours")]
    assert 0 < infer["fraction_of_peak"] < 1
    assert results[("probe fp32", "ours")]["value"] > 1.0  # GFLOP/s
    for precision_label in ("fp32", "int8"):  # our ONNX export in ONNX Runtime
        onnx_row = results[(f"infer tiny s16 b1 ONNX Runtime {precision_label}", "ours")]
        assert onnx_row["status"] == "ok" and onnx_row["value"] > 0, onnx_row
        assert ("infer tiny s16 b1 ONNX Runtime fp32", "keras_hub") not in results
    peer = results[("train tiny s16 b16 fp32", "keras_hub")]
    if not has_keras_hub:
        assert peer["status"] == "n/a" and "not installed" in peer["reason"]
    table = markdown.read_text()
    assert "| train tiny s16 b16 fp32 | s/step |" in table
    assert "(products " in table and "Targets: " in table
    assert not list(tmp_path.glob("*.partial"))


def test_ab_overrides_name_the_flag_and_the_fields():
    case = bench_run.model_case("train", "tiny", 16, 16, "float32")
    assert ab.case_with(case, {"jit": "1", "mode": "saved_model"}, "--b") == dict(
        case, jit=1, mode="saved_model")
    with pytest.raises(SystemExit, match="--b: the case has no field 'xla'"):
        ab.case_with(case, {"xla": "1"}, "--b")
    with pytest.raises(SystemExit, match="--env_a takes KEY=VALUE; got 'XLA_FLAGS'"):
        ab.parse_pairs(["XLA_FLAGS"], "--env_a")
    with pytest.raises(SystemExit):
        ab.main(["--tiny", "--row", "train tiny s16 b16"])  # not a row: lists them


def test_ab_alternates_the_first_place():
    calls = []

    class Side:
        def __init__(self, name):
            self.name = name

        def measure(self, units):
            calls.append(self.name)
            return [1.0 if self.name == "a" else 2.0]

    times = ab.alternate(Side("a"), Side("b"), 3)
    assert calls == ["a", "b", "b", "a", "a", "b"] and times == [[1.0] * 3, [2.0] * 3]


@pytest.mark.slow  # two workers: ~20 s
def test_ab_runs_two_variants_of_a_tiny_row():
    result = subprocess.run(
        [sys.executable, "bench/ab.py", "--tiny", "--row", "infer tiny s16 b1 in-process fp32",
         "--b", "jit=1", "--env_b", "TF_CPP_MIN_LOG_LEVEL=3", "--units", "2"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "B: ['jit=1'] ['TF_CPP_MIN_LOG_LEVEL=3']" in result.stdout
    assert "B/A per-pair ratio: median" in result.stdout


def test_isa_caps_are_named_in_the_header_and_table():
    info = {"onednn_max_cpu_isa": "AVX2", "xla_flags": "--xla_cpu_max_isa=AVX2"}
    assert bench_run.isa_caps(info, "; ") == (
        "; ONEDNN_MAX_CPU_ISA=AVX2; XLA_FLAGS=--xla_cpu_max_isa=AVX2")
    assert bench_run.isa_caps({"onednn_max_cpu_isa": None, "xla_flags": None}, ", ") == ""
