"""Models by Hub id against a local Hub stand-in (tests/hub_server.py): the real
huggingface_hub client over real HTTP, kvplan run as the user runs it (a fresh process per
case, a temporary HF_HOME each). Weight bytes are checked against sums of the tensors the
test itself wrote with the safetensors package.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest
from safetensors.numpy import save

from tests.hub_server import HubStandIn, Repo

# A llama of 2 layers small enough to write whole: 4 query / 2 KV heads of 16, fp16.
CONFIG = {
    "model_type": "llama",
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "intermediate_size": 128,
    "vocab_size": 256,
    "max_position_embeddings": 2048,
    "tie_word_embeddings": False,
    "torch_dtype": "float16",
}


def llama_tensors(layers: int) -> dict[str, np.ndarray]:
    """Every tensor of the tiny llama, in fp16 with the config's shapes."""
    shapes = {"model.embed_tokens.weight": (256, 64), "model.norm.weight": (64,)}
    shapes["lm_head.weight"] = (256, 64)
    for i in range(layers):
        p = f"model.layers.{i}."
        shapes |= {
            p + "self_attn.q_proj.weight": (64, 64),
            p + "self_attn.k_proj.weight": (32, 64),
            p + "self_attn.v_proj.weight": (32, 64),
            p + "self_attn.o_proj.weight": (64, 64),
            p + "mlp.gate_proj.weight": (128, 64),
            p + "mlp.up_proj.weight": (128, 64),
            p + "mlp.down_proj.weight": (64, 128),
            p + "input_layernorm.weight": (64,),
            p + "post_attention_layernorm.weight": (64,),
        }
    return {name: np.zeros(shape, dtype=np.float16) for name, shape in shapes.items()}


def nbytes(tensors: dict[str, np.ndarray]) -> int:
    return sum(t.size * t.itemsize for t in tensors.values())


def files(layers: int) -> dict[str, bytes]:
    return {
        "config.json": json.dumps({**CONFIG, "num_hidden_layers": layers}).encode(),
        "model.safetensors": save(llama_tensors(layers)),
    }


@pytest.fixture(scope="module")
def hub():
    with HubStandIn() as server:
        tiny = Repo()
        tiny.add("main", files(2))
        tiny.add("v1", files(1))
        server.repos["acme/tiny-llama"] = tiny
        gated = Repo(gated_token="hf_allowed")
        gated.add("main", files(2))
        server.repos["acme/gated-llama"] = gated
        # A repo named like a catalogue alias, with a config unlike the catalogue entry.
        impostor = Repo()
        impostor.add("main", files(1))
        server.repos["meta-llama/Llama-3.1-8B"] = impostor
        yield server


def kvplan(hub, home, *args, **env) -> subprocess.CompletedProcess:
    """`kvplan size ARGS --format json` in a fresh process against the stand-in."""
    return run(hub, home, "size", *args, "--format", "json", **env)


def run(hub, home, *argv, **env) -> subprocess.CompletedProcess:
    """`kvplan ARGV` in a fresh process against the stand-in."""
    environment = {
        k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING", "KVPLAN"))
    }
    environment |= {"HF_HOME": str(home), "HF_ENDPOINT": hub.endpoint, "NO_PROXY": "127.0.0.1"}
    environment |= {"HF_HUB_DISABLE_TELEMETRY": "1", **env}
    return subprocess.run(
        [sys.executable, "-m", "kvplan.cli", *argv],
        capture_output=True,
        text=True,
        env=environment,
        timeout=60,
    )


def one_error_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_public_model_weights_are_the_written_tensors_and_are_cached(hub, tmp_path):
    done = kvplan(hub, tmp_path, "acme/tiny-llama")
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    written = nbytes(llama_tensors(2))
    # 2 layers x (4096 + 2·2048 + 4096 + 3·8192 + 2·64) + 2 x 16384 + 64 = 106,816 fp16 values
    assert written == 106_816 * 2
    assert record["weights_bytes"] == written
    assert record["weights"]["bytes_by_dtype"] == {"F16": written}
    assert record["weights"]["basis"] == "safetensors headers"
    assert record["kv_bytes_per_token"] == 2 * 2 * 2 * 16 * 2  # K,V · layers · heads · dim · fp16
    # Read once: offline, the config comes from the HF cache and the headers from kvplan's.
    asked = len(hub.requests)
    again = kvplan(hub, tmp_path, "acme/tiny-llama", HF_HUB_OFFLINE="1")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["weights_bytes"] == written
    assert len(hub.requests) == asked
    assert "weights computed" not in again.stderr


def test_tp_split_and_replicated_bytes(hub, tmp_path):
    record = json.loads(kvplan(hub, tmp_path, "acme/tiny-llama", "--tp", "2").stdout)
    tensors = llama_tensors(2)
    replicated = sum(t.nbytes for n, t in tensors.items() if "norm" in n)
    split = nbytes(tensors) - replicated  # 2 KV heads: k/v split too at tp 2
    assert record["weights"]["per_gpu"]["replicated_bytes"] == replicated
    assert record["weights"]["per_gpu"]["split_bytes"] == split // 2
    assert record["weights_bytes_per_gpu"] == split // 2 + replicated


def test_revision_reads_that_commit(hub, tmp_path):
    record = json.loads(kvplan(hub, tmp_path, "acme/tiny-llama@v1").stdout)
    assert record["weights_bytes"] == nbytes(llama_tensors(1))
    assert record["layers"] == {"full": 1}
    line = one_error_line(kvplan(hub, tmp_path, "acme/tiny-llama@v9"))
    assert "no revision 'v9'" in line


def test_gated_model_says_accept_the_licence_and_set_hf_token(hub, tmp_path):
    line = one_error_line(kvplan(hub, tmp_path, "acme/gated-llama"))
    assert "gated" in line and "accept its licence" in line and "HF_TOKEN" in line
    assert f"{hub.endpoint}/acme/gated-llama" in line
    allowed = kvplan(hub, tmp_path, "acme/gated-llama", HF_TOKEN="hf_allowed")
    assert allowed.returncode == 0, allowed.stderr


def test_missing_model_says_check_the_id(hub, tmp_path):
    line = one_error_line(kvplan(hub, tmp_path, "acme/no-such-model"))
    assert "no such model on the Hub" in line and "check the id" in line


def test_offline_without_cache_says_run_once_online(hub, tmp_path):
    line = one_error_line(kvplan(hub, tmp_path, "acme/tiny-llama", HF_HUB_OFFLINE="1"))
    assert "HF_HUB_OFFLINE" in line and "run once online" in line


def test_slow_header_reads_are_one_warning_and_computed_weights(hub, tmp_path):
    hub.delay_s = 3.0
    try:
        start = time.monotonic()
        done = kvplan(hub, tmp_path, "acme/tiny-llama", HF_HUB_DOWNLOAD_TIMEOUT="1")
        elapsed_s = time.monotonic() - start
    finally:
        hub.delay_s = 0.0
    assert done.returncode == 0, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "safetensors headers not read" in lines[0], done.stderr
    assert json.loads(done.stdout)["weights"]["basis"] == "computed"
    assert elapsed_s < 15


def test_unreachable_hub_is_one_line_that_says_check_the_network():
    # huggingface_hub retries a refused connection with backoff for about 24 s before it
    # raises LocalEntryNotFoundError, too slow for CI: the client's own error is mapped here.
    from huggingface_hub.errors import LocalEntryNotFoundError

    from kvplan.catalog.hub import HubRef, _hub_error

    error = _hub_error(HubRef("acme/tiny"), LocalEntryNotFoundError("down"), "http://x", False)
    assert str(error) == (
        "acme/tiny: cannot reach the Hub at http://x and the model is not cached: check the "
        "network (or HF_ENDPOINT), then run again"
    )


def test_no_network_is_said_at_once_with_the_default_timeouts(hub, tmp_path):
    # Nothing listens on port 9: the client alone retries with backoff (1 + 2 + 4 + 8 + 8 s),
    # and kvplan waited HF_HUB_ETAG_TIMEOUT + HF_HUB_DOWNLOAD_TIMEOUT (10 + 10 s by default)
    # before saying so. A refused connection is no network: a probe says it at once.
    start = time.monotonic()
    done = kvplan(hub, tmp_path, "acme/not-cached", HF_ENDPOINT="http://127.0.0.1:9")
    elapsed_s = time.monotonic() - start
    line = one_error_line(done)
    assert line == (
        "error: acme/not-cached: cannot reach the Hub at http://127.0.0.1:9 (Connection "
        "refused) and the model is not cached: check the network (or HF_ENDPOINT), then run again"
    )
    assert elapsed_s < 15


def test_a_name_that_does_not_resolve_is_no_network(hub, tmp_path):
    # .invalid never resolves (RFC 6761 §6.4).
    done = kvplan(hub, tmp_path, "acme/not-cached", HF_ENDPOINT="http://hub.invalid")
    line = one_error_line(done)
    assert "cannot reach the Hub at http://hub.invalid (the name hub.invalid does not resolve)" in (
        line
    )


def test_a_cached_model_still_serves_when_the_hub_is_unreachable(hub, tmp_path):
    assert kvplan(hub, tmp_path, "acme/tiny-llama").returncode == 0  # fills the cache
    done = kvplan(hub, tmp_path, "acme/tiny-llama", HF_ENDPOINT="http://127.0.0.1:9",
                  HF_HUB_ETAG_TIMEOUT="1", HF_HUB_DOWNLOAD_TIMEOUT="1")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["weights"]["basis"] != "computed"


def test_catalogue_alias_wins_without_the_network_and_hf_prefix_forces_the_hub(hub, tmp_path):
    # The stand-in holds a 1-layer model under this id; the catalogue entry has 32 layers.
    offline_endpoint = kvplan(
        hub, tmp_path, "meta-llama/Llama-3.1-8B", HF_ENDPOINT="http://127.0.0.1:9"
    )
    assert json.loads(offline_endpoint.stdout)["model"] == "llama-3.1-8b"
    forced = json.loads(kvplan(hub, tmp_path, "hf:meta-llama/Llama-3.1-8B").stdout)
    assert forced["layers"] == {"full": 1}


def test_slow_config_is_one_line_within_the_stated_timeouts(hub, tmp_path):
    # Uncached, the client retries a timed-out metadata request for up to a minute; kvplan
    # waits HF_HUB_ETAG_TIMEOUT + HF_HUB_DOWNLOAD_TIMEOUT = 2 s, plus the process start.
    hub.config_delay_s = 30.0
    try:
        start = time.monotonic()
        done = kvplan(
            hub, tmp_path, "acme/tiny-llama", HF_HUB_ETAG_TIMEOUT="1", HF_HUB_DOWNLOAD_TIMEOUT="1"
        )
        elapsed_s = time.monotonic() - start
    finally:
        hub.config_delay_s = 0.0
    line = one_error_line(done)
    assert line.startswith("error: acme/tiny-llama: the Hub at ")
    assert "did not answer in time" in line
    assert elapsed_s < 12


def test_show_and_import_hf_take_a_hub_id(hub, tmp_path):
    shown = run(hub, tmp_path, "show", "hf:acme/tiny-llama", "--format", "json")
    assert shown.returncode == 0, shown.stderr
    record = json.loads(shown.stdout)
    assert record["num_layers"] == 2 and record["aliases"] == ["acme/tiny-llama"]
    imported = run(hub, tmp_path, "import-hf", "acme/tiny-llama@v1", "--name", "mine", "-f", "json")
    assert imported.returncode == 0, imported.stderr
    spec = json.loads(imported.stdout)
    assert (spec["name"], spec["num_layers"], spec["hidden_size"]) == ("mine", 1, 64)
    sha = hub.repos["acme/tiny-llama"].refs["v1"]
    assert spec["source"] == f"https://huggingface.co/acme/tiny-llama/blob/{sha}/config.json"
    missing = run(hub, tmp_path, "import-hf", "acme/no-such-model")
    assert "no such model on the Hub" in one_error_line(missing)
