"""benchmarks/part4.py runs end to end at a tiny size, its report hangs together, and its
targets are judged right on planted numbers.

No timing is compared with a target here; what is checked is that the reported figures
are what the documentation says they are, computed from the raw times the report holds
(medians and quartiles of those, ratios taken round by round, each run's median), that
the caches hold what their formulas say (DeepSeek-V4-Flash's CSA and HCA caches, built
with ``CompressedCache.holding``, what the atlas bills less the one window key the next
token brings), and that the verdicts follow the targets: the Gated DeltaNet step flat
(growth at most 1.2 in every run) while the full-attention step grows (above 1.2 in
every run), prefill no slower than transformers' (at most 1.0), chunked faster than
recurrent (below 1.0).
"""

from __future__ import annotations

import json
import statistics

import pytest
import torch
from bench_scripts import load

import attention

TINY = [
    *("--d-in", "32", "--num-heads", "4", "--num-kv-heads", "2", "--head-dim", "8"),
    *("--linear-key-heads", "2", "--linear-value-heads", "4"),
    *("--linear-key-dim", "8", "--linear-value-dim", "6"),
    *("--index-heads", "2", "--index-dim", "8", "--index-rope-dim", "4"),
    *("--window", "12", "--top-k", "20", "--chunk-size", "8", "--threads", "1"),
    *("--mamba-heads", "4", "--mamba-head-dim", "6", "--mamba-state", "5"),
    *("--mamba-groups", "2", "--mamba-conv", "3", "--mamba-chunk-size", "8"),
    # DeepSeek-V4's layers, small; rates that leave tokens waiting at 8, 16 and 32
    *("--v4-d-in", "32", "--v4-heads", "2", "--v4-head-dim", "8", "--v4-rope-dim", "4"),
    *("--v4-q-rank", "8", "--v4-o-groups", "2", "--v4-o-rank", "4", "--v4-window", "6"),
    *("--v4-index-heads", "2", "--v4-index-dim", "6", "--v4-top-k", "2"),
    *("--csa-rate", "3", "--hca-rate", "6"),
]
COMPRESSED = ["csa", "hca"]


@pytest.fixture(scope="module")
def part4():
    return load("part4")


def quartiles(values: list[float]) -> tuple[float, float, float]:
    """The first quartile, median and third quartile of ``values`` (statistics' default)."""
    q1, _, q3 = statistics.quantiles(values, n=4)
    return q1, statistics.median(values), q3


def test_quick_run_reports_every_layer_the_formulas_memory_and_its_times_summaries(
    part4, tmp_path, capsys
):
    out = tmp_path / "part4.json"
    contexts = ["--contexts", "32", "8", "16"]
    prefill = ["--prefill-tokens", "20", "--prefill-repeats", "2"]
    argv = ["--quick", "--repeats", "2", *TINY, *contexts, *prefill]
    results = part4.main([*argv, "--out", str(out)])
    assert json.loads(out.read_text(encoding="utf-8")) == json.loads(capsys.readouterr().out)
    assert results["environment"]["threads"] == 1
    rows = results["decode_rows"]
    assert [row["context"] for row in rows] == [8, 16, 32]  # sorted
    sides = ["full", "window", "deltanet", "mamba2"] + (["sparse"] if part4.has_sparse() else [])
    sides += COMPRESSED
    per_token = 2 * 2 * 8 * 4  # key and value, 2 kv heads, head_dim 8, float32
    # conv: (q, k: 2 heads of 8) + (v: 4 heads of 6) channels, 3 past inputs; state 4 x 8 x 6
    state_bytes = 4 * ((2 * 2 * 8 + 4 * 6) * 3 + 4 * 8 * 6)
    # Mamba-2: (x: 4 heads of 6) + (B, C: 2 groups of 5) channels, 3 inputs; state 4 x 6 x 5
    mamba_bytes = 4 * ((4 * 6 + 2 * 2 * 5) * 3 + 4 * 6 * 5)
    for row in rows:
        n = row["context"]
        assert list(row["ms_per_token"]) == sides
        memory = row["memory"]
        assert memory["full"]["bytes"] == memory["full"]["formula"] == per_token * n
        assert memory["window"]["bytes"] == per_token * min(n, 11)  # window - 1 held
        assert memory["deltanet"]["bytes"] == state_bytes  # the same at every context
        assert memory["mamba2"]["bytes"] == memory["mamba2"]["formula"] == mamba_bytes
        if "sparse" in sides:  # the full cache and one indexer key of 8 numbers per token
            assert memory["sparse"]["bytes"] == (per_token + 8 * 4) * n
        # The window's 5 keys of 8; CSA: entries of 8 and of 6 (the indexer's) every 3
        # tokens, the waiting tokens' vectors and gates twice as wide, the overlap of 3
        # places; HCA: an entry every 6 tokens, the waiting tokens' vectors and gates
        window = min(n, 5) * 8
        entries, waiting = divmod(n, 3)
        csa = sum(d * (entries + 2 * 2 * waiting + 2 * 3) for d in (8, 6))
        assert memory["csa"]["bytes"] == 4 * (window + csa)
        entries, waiting = divmod(n, 6)
        assert memory["hca"]["bytes"] == 4 * (window + 8 * (entries + 2 * waiting))
        assert all(entry["equal"] for entry in memory.values())
        checks = row["max_abs_difference"]
        assert "window_rolled_equals_masked" in checks
        assert checks["csa_steps_alike"] == checks["hca_steps_alike"] == 0  # start alike
        assert ("window_equals_full" in checks) == (n < 12)  # the window covers the context
        assert ("sparse_equals_full" in checks) == ("sparse" in sides and n < 20)
        assert row["outputs_agree"] and all(0 <= d <= 1e-4 for d in checks.values())
        # --quick, 2 repeats: 6 timed rounds each, one step of every layer per round.
        for side in sides:
            times = row["times_s"][side]
            assert len(times) == 12 and all(t > 0 for t in times)
            ms = row["ms_per_token"][side]
            expected = quartiles([t * 1e3 for t in times])
            assert (ms["q1"], ms["median"], ms["q3"]) == pytest.approx(expected)
            per_run = [statistics.median(times[i : i + 6]) * 1e3 for i in (0, 6)]
            assert row["median_ms_per_run"][side] == pytest.approx(per_run)
    # The growth is taken round by round (longest context over shortest), then each run's median.
    target = results["decode_target"]
    for side in sides:
        ratios = [
            long / short
            for long, short in zip(rows[-1]["times_s"][side], rows[0]["times_s"][side], strict=True)
        ]
        per_run = [statistics.median(ratios[i : i + 6]) for i in (0, 6)]
        assert target["growth_per_run"][side] == pytest.approx(per_run)
    assert target["worst_deltanet_growth"] == max(target["growth_per_run"]["deltanet"])
    assert target["least_full_growth"] == min(target["growth_per_run"]["full"])
    assert target["worst_mamba2_growth"] == max(target["growth_per_run"]["mamba2"])
    flat = max(target["worst_deltanet_growth"], target["worst_mamba2_growth"])
    assert target["met"] == (flat <= 1.2 < target["least_full_growth"])

    prefill = results["prefill"]
    assert prefill["tokens"] == 20 and prefill["outputs_agree"]
    assert set(prefill["max_abs_difference"]) == {
        "ours_chunked",
        "ours_recurrent",
        "ssd_ours_chunked",
        "ssd_ours_recurrent",
    }
    assert all(0 <= d <= 1e-4 for d in prefill["max_abs_difference"].values())
    # (b) to (e) each in paired rounds of their own: quick, 5 and 2 rounds; 2 runs.
    pairs = {
        "ours_over_transformers": (("ours_chunked", "transformers_chunked"), 5),
        "chunked_over_recurrent": (("ours_chunked", "ours_recurrent"), 2),
        "ssd_ours_over_transformers": (("ssd_ours_chunked", "ssd_transformers_chunked"), 5),
        "ssd_chunked_over_recurrent": (("ssd_ours_chunked", "ssd_ours_recurrent"), 2),
    }
    assert set(prefill["times_s"]) == set(pairs)
    for name, ((top, bottom), rounds) in pairs.items():
        times = prefill["times_s"][name]
        assert set(times) == {top, bottom}
        assert all(len(t) == 2 * rounds and min(t) > 0 for t in times.values())
        ratios = [a / b for a, b in zip(times[top], times[bottom], strict=True)]
        assert prefill["ratio_per_round"][name] == pytest.approx(ratios)
        per_run = [statistics.median(ratios[i : i + rounds]) for i in (0, rounds)]
        assert prefill["median_ratio_per_run"][name] == pytest.approx(per_run)
        ratio = prefill["ratio"][name]
        assert (ratio["q1"], ratio["median"], ratio["q3"]) == pytest.approx(quartiles(ratios))
    # Each call's ms from the rounds of its first pair.
    first = {
        "ours_chunked": prefill["times_s"]["ours_over_transformers"]["ours_chunked"],
        "transformers_chunked": prefill["times_s"]["ours_over_transformers"][
            "transformers_chunked"
        ],
        "ours_recurrent": prefill["times_s"]["chunked_over_recurrent"]["ours_recurrent"],
        "ssd_ours_chunked": prefill["times_s"]["ssd_ours_over_transformers"]["ssd_ours_chunked"],
        "ssd_transformers_chunked": prefill["times_s"]["ssd_ours_over_transformers"][
            "ssd_transformers_chunked"
        ],
        "ssd_ours_recurrent": prefill["times_s"]["ssd_chunked_over_recurrent"][
            "ssd_ours_recurrent"
        ],
    }
    for name, seconds in first.items():
        ms = prefill["ms"][name]
        expected = quartiles([t * 1e3 for t in seconds])
        assert (ms["q1"], ms["median"], ms["q3"]) == pytest.approx(expected)
    worst = prefill["median_ratio_per_run"]
    assert prefill["targets"]["b"]["met"] == (max(worst["ours_over_transformers"]) <= 1.0)
    assert prefill["targets"]["c"]["met"] == (max(worst["chunked_over_recurrent"]) < 1.0)
    assert prefill["targets"]["d"]["met"] == (max(worst["ssd_ours_over_transformers"]) <= 1.0)
    assert prefill["targets"]["e"]["met"] == (max(worst["ssd_chunked_over_recurrent"]) < 1.0)
    load = results["environment"]["load_average_before"]
    assert load is None or len(load) == 3


@pytest.mark.parametrize(
    ("parts", "decode", "pairs"),
    [
        (["b", "c"], False, {"ours_over_transformers", "chunked_over_recurrent"}),
        (["b"], False, {"ours_over_transformers"}),
        (["c", "a"], True, {"chunked_over_recurrent"}),
        (["a"], True, None),
        (["d", "e"], False, {"ssd_ours_over_transformers", "ssd_chunked_over_recurrent"}),
        (["d"], False, {"ssd_ours_over_transformers"}),
    ],
)
def test_parts_run_only_the_measurements_asked_for(part4, capsys, parts, decode, pairs):
    argv = ["--quick", *TINY, "--contexts", "8", "--prefill-tokens", "9", "--parts", *parts]
    results = part4.main(argv)
    err = capsys.readouterr().err
    assert bool(results["decode_rows"]) == decode
    assert ("(a) decode: not measured" in err) == (not decode)
    if pairs is None:
        assert results["prefill"] is None
        return
    prefill = results["prefill"]
    assert set(prefill["times_s"]) == set(prefill["median_ratio_per_run"]) == pairs
    recurrent = "chunked_over_recurrent" in pairs
    assert ("ours_recurrent" in prefill["max_abs_difference"]) == recurrent
    ssd_recurrent = "ssd_chunked_over_recurrent" in pairs
    assert ("ssd_ours_recurrent" in prefill["max_abs_difference"]) == ssd_recurrent
    for key, (name, _) in part4.PAIRS.items():
        assert (prefill["targets"][key]["met"] is None) == (name not in pairs)


def test_without_topk_sparse_attention_the_sparse_row_is_left_out_with_a_note(
    part4, monkeypatch, capsys
):
    monkeypatch.setattr(part4, "has_sparse", lambda: False)
    results = part4.main(["--quick", *TINY, "--contexts", "8", "--prefill-tokens", "9"])
    err = capsys.readouterr().err
    (row,) = results["decode_rows"]
    assert list(row["ms_per_token"]) == ["full", "window", "deltanet", "mamba2", *COMPRESSED]
    assert "sparse" not in row["memory"] and "sparse_equals_full" not in row["max_abs_difference"]
    assert results["layouts"]["sparse"].startswith("not yet")
    assert "not yet" in err
    # One context: no growth to judge.
    assert results["decode_target"]["met"] is None


@pytest.mark.skipif(
    not hasattr(attention, "topk_sparse_attention"), reason="topk_sparse_attention not merged"
)
def test_the_sparse_step_equals_the_full_step_when_top_k_covers_every_key(part4, capsys):
    results = part4.main(["--quick", *TINY, "--contexts", "16", "--prefill-tokens", "9"])
    capsys.readouterr()
    (row,) = results["decode_rows"]
    assert "sparse" in row["ms_per_token"]
    assert 0 <= row["max_abs_difference"]["sparse_equals_full"] <= 1e-4


@pytest.mark.parametrize(
    ("deltanet", "full", "flat", "grows"),
    [
        ([1.05, 1.2], [3.0, 2.5], True, True),  # 1.2 is still flat
        ([1.05, 1.21], [3.0, 2.5], False, True),  # one run not flat is enough to miss
        ([1.0, 1.0], [3.0, 1.2], True, False),  # 1.2 is not growth
        ([0.9, 1.1], [1.5, 1.3], True, True),
    ],
)
def test_decode_target_needs_every_runs_deltanet_flat_and_full_growing(
    part4, deltanet, full, flat, grows
):
    growth = {"full": full, "window": [1.0, 1.0], "deltanet": deltanet}
    target = part4.decode_target(growth, 1024, 65536)
    assert target["worst_deltanet_growth"] == max(deltanet)
    assert target["least_full_growth"] == min(full)
    assert (target["deltanet_flat"], target["full_grows"]) == (flat, grows)
    assert target["met"] == (flat and grows)
    assert "65536" in target["what"] and "1024" in target["what"]
    # The Mamba-2 step, when measured, must be flat too.
    growth["mamba2"] = [1.1, 1.3]
    target = part4.decode_target(growth, 1024, 65536)
    assert target["worst_mamba2_growth"] == 1.3 and target["mamba2_flat"] is False
    assert target["met"] is False


@pytest.mark.parametrize(
    ("versus_transformers", "chunked_over_recurrent", "b", "c"),
    [
        ([0.8, 1.0], [0.1, 0.2], True, True),  # ratio 1.0: no slower, met
        ([0.8, 1.01], [0.1, 0.2], False, True),
        ([0.9, 0.9], [0.5, 1.0], True, False),  # equal speed is not faster
        ([1.2, 0.7], [1.3, 0.4], False, False),
    ],
)
def test_prefill_targets_use_every_runs_median(
    part4, versus_transformers, chunked_over_recurrent, b, c
):
    per_run = {
        "ours_over_transformers": versus_transformers,
        "chunked_over_recurrent": chunked_over_recurrent,
    }
    targets = part4.prefill_targets(per_run, 4096)
    assert targets["b"]["worst_run_median_ratio"] == max(versus_transformers)
    assert targets["c"]["worst_run_median_ratio"] == max(chunked_over_recurrent)
    assert (targets["b"]["met"], targets["c"]["met"]) == (b, c)
    # A pair not measured (--parts) has no verdict.
    del per_run["chunked_over_recurrent"]
    targets = part4.prefill_targets(per_run, 4096)
    assert targets["c"] == {**targets["c"], "worst_run_median_ratio": None, "met": None}
    assert targets["b"]["met"] == b


def test_defaults_are_qwen3_nexts_layout_gemma_3s_window_and_the_issues_sizes(part4):
    args = part4.parse_args([])
    model = attention.MODELS["Qwen3-Next 80B-A3B"]
    layout = (args.d_in, args.num_heads, args.num_kv_heads, args.head_dim)
    assert layout == (model.hidden_size, model.num_heads, model.num_kv_heads, model.head_dim)
    assert layout == (2048, 16, 2, 256)
    # Qwen3-Next's linear-attention sizes and DeepSeek-V3.2's indexer, from MODELS
    assert (args.linear_key_heads, args.linear_value_heads) == (
        model.linear_num_key_heads,
        model.linear_num_value_heads,
    )
    sparse = attention.MODELS["DeepSeek-V3.2"]
    assert (args.index_heads, args.index_dim, args.top_k) == (
        sparse.index_n_heads,
        sparse.index_head_dim,
        sparse.index_topk,
    )
    heads = (args.linear_key_heads, args.linear_value_heads)
    assert (*heads, args.linear_key_dim, args.linear_value_dim, args.conv_size) == (
        16,
        32,
        128,
        128,
        4,
    )
    assert args.window == attention.MODELS["Gemma 3 27B"].sliding_window == 1024
    assert args.contexts == [1024, 4096, 16384, 65536] and args.prefill_tokens == 4096
    assert (args.threads, args.repeats, args.top_k) == (2, 3, 2048)
    assert (args.prefill_rounds, args.recurrent_rounds, args.prefill_repeats) == (21, 5, 1)
    assert args.parts == ["a", "b", "c", "d", "e"]
    nano = attention.MODELS["Nemotron 3 Nano 30B"].mamba
    mamba = (args.mamba_heads, args.mamba_head_dim, args.mamba_state, args.mamba_groups)
    assert mamba == (nano.num_heads, nano.inner_size // nano.num_heads, nano.state_size, 8)
    assert (args.mamba_conv, args.mamba_chunk_size) == (nano.conv_kernel_dim, nano.chunk_size)
    # DeepSeek-V4-Flash's compressed layers, from MODELS
    flash = attention.MODELS["DeepSeek-V4-Flash"]
    compressed = flash.compressed
    v4 = (args.v4_d_in, args.v4_heads, args.v4_head_dim, args.v4_rope_dim, args.v4_window)
    assert v4 == (flash.hidden_size, flash.num_heads, flash.head_dim, 64, flash.sliding_window)
    assert v4 == (4096, 64, 512, 64, 128)
    output = (args.v4_q_rank, args.v4_o_groups, args.v4_o_rank)
    assert output == (compressed.q_lora_rank, compressed.o_groups, compressed.o_lora_rank)
    index = (args.v4_index_heads, args.v4_index_dim, args.v4_top_k)
    assert index == (flash.indexer.num_heads, flash.indexer.head_dim, flash.indexer.top_k)
    assert (args.csa_rate, args.hca_rate) == (compressed.csa_rate, compressed.hca_rate) == (4, 128)
    quick = part4.parse_args(["--quick"])
    assert (quick.repeats, quick.prefill_rounds, quick.recurrent_rounds) == (1, 5, 2)
    for bad in (
        ["--window", "0"],
        ["--contexts", "0"],
        ["--rounds", "0"],
        ["--prefill-repeats", "0"],
        ["--recurrent-rounds", "0"],
        ["--parts", "f"],
        ["--mamba-heads", "6", "--mamba-groups", "4"],
        ["--hca-rate", "0"],
        ["--v4-head-dim", "0"],
    ):
        with pytest.raises(SystemExit):
            part4.parse_args(bad)


@pytest.mark.parametrize("tokens", [1000, 1024, 65536, 65539])
def test_the_compressed_rows_bytes_are_the_atlas_bill_less_one_window_key(part4, tokens):
    # The atlas counts a sliding layer's window tokens, the keys the last query reads; the
    # cache between two steps holds one fewer (the next token brings it)
    args = part4.parse_args([])
    flash = attention.MODELS["DeepSeek-V4-Flash"]
    bill = attention.models.layer_cache_bytes(flash, tokens, torch.float32)
    key = 4 * flash.head_dim
    for side, kind in part4.COMPRESSED_KINDS.items():
        expected = bill[flash.layer_types.index(kind)] - key
        assert 4 * part4.compressed_numbers(args, side, tokens) == expected
