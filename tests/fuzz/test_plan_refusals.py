"""Refusals that belong to the engine model, not to input parsing.

The input layer reads these plans correctly; only the engine model can say they cannot run:
a TP degree that does not divide the attention heads, a KV budget larger than the GPU, a
zero-token block. And a batch of a million sequences must be sized from (length, count)
pairs, not one list entry per sequence.
"""

from __future__ import annotations

import json

import pytest
from fuzz_corpus import PRODUCTS_FILE
from fuzz_harness import assert_accepted, assert_refused, cli

# vLLM refuses at start-up: "Total number of attention heads (28) must be divisible by tensor
# parallel size (3)" (vllm/config/model.py, ModelConfig.verify_with_parallel_config).
# GPT-2 has 12 heads (n_head 12); Llama 3.1 8B has 32 (num_attention_heads 32).


@pytest.mark.parametrize(
    "argv",
    [
        ("size", "gpt2", "--tp", "5"),
        ("size", "llama-3.1-8b", "--tp", "3"),
        ("claim", "gpt2", "--sku", "h100-sxm", "--tp", "5"),
        ("report", "--model", "gpt2", "--sku", "h100-sxm", "--tp", "5"),
    ],
)
def test_tp_that_does_not_divide_the_heads(argv):
    assert_refused(cli(*argv), "--tp")


@pytest.mark.parametrize("tp", ["1", "2", "3", "4", "6", "12"])
def test_tp_that_divides_the_heads(tp):
    assert_accepted(cli("size", "gpt2", "--tp", tp))


def test_tp_7_in_a_products_file(tmp_path):
    path = tmp_path / "products.yaml"
    path.write_text(PRODUCTS_FILE.read_text().replace("    tp: 1\n", "    tp: 7\n", 1))
    assert_refused(cli("check", str(path)), f"{path}:", "products.0")


@pytest.mark.parametrize(
    "argv",
    [
        ("size", "gpt2", "-e", "vllm", "--block-size", "0"),
        ("report", "--model", "gpt2", "--sku", "h100-sxm", "--block-size", "0"),
        ("verify", "gpt2", "--block-size", "0"),
    ],
)
def test_block_size_0_on_the_command_line(argv):
    assert_refused(cli(*argv), "--block-size: 0 must be between 1 and 4,096")


def test_block_size_0_in_the_engine_options():
    # Below the CLI a setting is named by its declared name; only the CLI prints its flag.
    from kvplan.engine import EngineSettings
    from kvplan.engine.settings import flag_of
    from kvplan.errors import SettingError

    with pytest.raises(SettingError, match=r"^tokens_per_block: 0 must be between 1 and 4,096$"):
        EngineSettings(tokens_per_block=0)
    try:
        EngineSettings(tokens_per_block=0)
    except SettingError as error:
        assert error.render(flag_of) == "--block-size: 0 must be between 1 and 4,096"


def test_kv_memory_larger_than_the_gpu():
    # An H100 SXM has 80 GB (85,520,809,984 bytes as nvidia-smi reports it); 1 TiB is 13× that.
    argv = ("report", "--model", "gpt2", "--sku", "h100-sxm", "--tp", "1", "--kv-memory", "1TiB")
    assert_refused(cli(*argv), "--kv-memory")


def test_kv_memory_larger_than_the_gpu_in_a_products_file(tmp_path):
    path = tmp_path / "products.yaml"
    text = PRODUCTS_FILE.read_text().replace("context: 8k\n", "context: 8k\n    kv_memory: 1TiB\n")
    path.write_text(text)
    assert_refused(cli("check", str(path)), "kv_memory")


@pytest.mark.parametrize(
    ("argv", "key"),
    [
        (("size", "gpt2", "--batch", "1000000", "-c", "1k", "-f", "json"), "kv_bytes"),
        (
            ("claim", "gpt2", "--sku", "h100-sxm", "--batch", "1000000", "-c", "1k", "-f", "json"),
            "kv_bytes_batch",
        ),
    ],
)
def test_a_million_sequences_in_a_few_seconds(argv, key):
    # GPT-2: 12 layers × 12 KV heads × 64 head_dim × 2 (K and V) × 2 bytes (bf16) = 36,864
    # bytes a token; 10⁶ sequences × 1,024 tokens × 36,864 = 37,748,736,000,000 bytes.
    outcome = cli(*argv, limit_s=3.0)
    assert_accepted(outcome)
    assert json.loads(outcome.stdout)[key] == 37_748_736_000_000
