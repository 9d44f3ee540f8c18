"""The time of one scheduler step, operation by operation (DESIGN §4b, docs/speed-model.md).

A step of T tokens (decode sequences plus prefill chunk tokens) on one replica costs, summed
over the pipeline stages in turn (one GPU per stage; stage times add, no micro-batch overlap):

- per layer, each GEMM (qkv and output projections, the dense MLP, the shared experts, the
  routed experts) as max(weight bytes ÷ achieved bandwidth, 2·M·N·K ÷ achieved FLOP/s), with
  M = T (routed experts: M = tokens per touched expert) and the compute fraction rising with M
  (`operations.saturating_fraction`);
- attention: decode reads each sequence's KV in the engine's layout plus a fixed cost per
  sequence (worth `attention_decode_fixed_tokens` tokens of KV: short contexts cannot fill the
  memory pipe); prefill chunks compute QKᵀ and PV at the 16-bit peak (FlashAttention runs
  bf16/fp16 MMAs whatever the weights' dtype) times a fraction rising with the chunk length;
- the elementwise kernels (norms, residual adds, rotary, activation, KV write) as bytes;
- logits (lm_head GEMM for the sequences that sample) and sampling;
- collectives: two all-reduces per layer under TP, the stage-to-stage sends under PP, expert
  dispatch and combine (all-to-all) under expert parallelism;
- the engine's per-step and per-sequence overhead and each kernel's fixed cost (`overhead.py`).

Everything but decode attention depends on the step's tokens and sequences only, so a run of
decode steps whose KV reads grow by a fixed number of bytes a step is exactly linear in the
step index: `decode_line`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property

from kvplan.engine.deployment import Deployment
from kvplan.perf.collectives import all_reduce_s, all_to_all_s, pipeline_sends_s
from kvplan.perf.constants import PerfConstants, shipped_constants
from kvplan.perf.flops import attention_chunk_flops_function, expected_experts_touched
from kvplan.perf.layers import (
    ACTIVATION_BYTES,
    LayerGroup,
    StageShape,
    StageTotals,
    stage_shapes,
    stage_totals,
)
from kvplan.perf.operations import gemm_s, saturating_fraction
from kvplan.perf.overhead import Overhead, engine_overhead
from kvplan.perf.rates import ResolvedRates, resolved_rates
from kvplan.specs import SkuSpec

LOGIT_BYTES = 4  # fp32 logits: written, then read by softmax and the sampler
SAMPLING_PASSES = 3  # write, softmax read + write; top-k/p read

# The operations of a step, in the order --explain lists them.
OPERATIONS = (
    "qkv_proj",
    "out_proj",
    "mlp",
    "shared_experts",
    "routed_experts",
    "attention_decode",
    "attention_prefill",
    "elementwise",
    "logits",
    "sampling",
    "tp_all_reduce",
    "ep_all_to_all",
    "pp_send",
    "engine_overhead",
)


@dataclass(frozen=True)
class StepShape:
    """What a step holds: decode sequences and their KV reads, and prefill chunks."""

    decode_seqs: int
    decode_kv_bytes: float  # KV bytes the decode sequences read, all stages
    chunks: tuple[tuple[int, int], ...] = ()  # (tokens already cached, tokens computed now)
    prefix_kv_bytes: float = 0.0  # KV bytes the chunks' cached prefixes read, all stages

    @property
    def tokens(self) -> int:
        return self.decode_seqs + sum(chunk for _, chunk in self.chunks)

    @property
    def sequences(self) -> int:
        return self.decode_seqs + len(self.chunks)


class StepModel:
    """Step times of one replica of `deployment` on `sku` (build with `step_model()`)."""

    def __init__(self, deployment: Deployment, sku: SkuSpec, rates: ResolvedRates) -> None:
        self.deployment, self.sku, self.rates = deployment, sku, rates
        self.stages: tuple[StageShape, ...] = stage_shapes(deployment)
        self.overhead: Overhead = engine_overhead(deployment, rates.constants, rates.cuda_graphs)
        self.kv_token_bytes = rates.kv_token_bytes  # per context token, all stages
        # Each new token's K and V are written once per layer: per layer, the mean over layers.
        layers = sum(stage.layers for stage in self.stages)
        self.kv_write_bytes = self.kv_token_bytes / layers
        self._fixed: dict[tuple[int, int], float] = {}
        self.totals: tuple[StageTotals, ...] = stage_totals(deployment)
        self._layers = layers
        self._kernels = sum(stage.kernels for stage in self.totals)

    # --- the parts ----------------------------------------------------------------------

    def parts(self, shape: StepShape) -> dict[str, float]:
        """Seconds of each operation of a step (OPERATIONS order), summed over layers."""
        parts = dict.fromkeys(OPERATIONS, 0.0)
        self._token_parts(shape.tokens, shape.sequences, parts)
        parts["attention_decode"] = self.decode_attention_s(
            shape.decode_seqs, shape.decode_kv_bytes
        )
        parts["attention_prefill"] = self._prefill_attention_s(shape.chunks, shape.prefix_kv_bytes)
        return parts

    def step_s(self, shape: StepShape) -> float:
        """Seconds of one step: the sum of `parts`, the token-only terms remembered."""
        if shape.tokens == 0:
            return 0.0
        return (
            self.fixed_s(shape.tokens, shape.sequences)
            + self.decode_attention_s(shape.decode_seqs, shape.decode_kv_bytes)
            + self._prefill_attention_s(shape.chunks, shape.prefix_kv_bytes)
        )

    def fixed_s(self, tokens: int, sequences: int) -> float:
        """Seconds of everything but attention for a step of `tokens` tokens (remembered)."""
        key = (tokens, sequences)
        found = self._fixed.get(key)
        if found is None:
            found = self._fixed[key] = self._summed_s(tokens, sequences)
        return found

    def _summed_s(self, tokens: int, sequences: int) -> float:
        """What `_token_parts` sums to, from the stage totals (a few terms a stage)."""
        if tokens == 0:
            return 0.0
        r, model = self.rates, self.deployment.model
        peak = r.peak_flop_per_s
        dense_line = (
            2 * tokens / (peak * saturating_fraction(r.gemm_fraction, tokens, r.gemm_half_tokens))
        )
        head_line = (
            2
            * sequences
            / (peak * saturating_fraction(r.gemm_fraction, sequences, r.gemm_half_tokens))
        )
        total = 0.0
        elementwise_bytes = 0.0
        for stage in self.totals:
            total += stage.dense_params * max(
                stage.linear_bytes_per_param / r.gemm_bytes_per_s, dense_line
            )
            if stage.lm_head_bytes:
                total += max(
                    stage.lm_head_bytes / r.gemm_bytes_per_s, stage.lm_head_params * head_line
                )
            for count, params, bpp, experts, k in stage.routed:
                total += count * self._routed_terms_s(tokens, params, bpp, experts, k)
            elementwise_bytes += stage.elementwise_bytes_per_token
        elementwise_bytes += self._layers * self.kv_write_bytes
        total += tokens * elementwise_bytes / r.elementwise_bytes_per_s
        total += (
            sequences * model.vocab_size * LOGIT_BYTES * SAMPLING_PASSES / r.elementwise_bytes_per_s
        )
        return total + self._collectives_s(tokens) + self.overhead.seconds(sequences, self._kernels)

    def decode_attention_s(self, decode_seqs: int, kv_bytes: float) -> float:
        """Decode attention: the KV read plus each sequence's fixed cost, at attention bandwidth."""
        if decode_seqs == 0:
            return 0.0
        fixed_bytes = decode_seqs * self.rates.attention_fixed_tokens * self.kv_token_bytes
        return (kv_bytes + fixed_bytes) / self.rates.attention_bytes_per_s

    def decode_line(self, decode_seqs: int) -> tuple[float, float]:
        """(a, b): a decode-only step of `decode_seqs` sequences reading R KV bytes takes
        a + b·R seconds, exactly."""
        a = self.fixed_s(decode_seqs, decode_seqs) + self.decode_attention_s(decode_seqs, 0.0)
        return a, 1.0 / self.rates.attention_bytes_per_s

    # --- the terms ----------------------------------------------------------------------

    @cached_property
    def _attention_flops(self) -> Callable[[int, int], int]:
        # Looked up on the first prefill: a report's decode steps never need it.
        return attention_chunk_flops_function(self.deployment.model)

    def _prefill_attention_s(self, chunks: Sequence[tuple[int, int]], prefix_bytes: float) -> float:
        if not chunks:
            return 0.0
        rates, tp = self.rates, self.deployment.tp
        compute_s = 0.0
        for done, chunk in chunks:
            fraction = saturating_fraction(
                rates.prefill_attention_fraction, chunk, rates.prefill_attention_half_tokens
            )
            compute_s += (
                self._attention_flops(done, chunk)
                / tp
                / (rates.attention_peak_flop_per_s * fraction)
            )
        return max(compute_s, prefix_bytes / rates.attention_bytes_per_s)

    def _token_parts(self, tokens: int, sequences: int, parts: dict[str, float]) -> None:
        if tokens == 0:
            return
        model, rates = self.deployment.model, self.rates
        for stage in self.stages:
            for group in stage.groups:
                self._layer_parts(group, tokens, parts)
            if stage.lm_head_bytes:
                parts["logits"] += gemm_s(
                    stage.lm_head_bytes,
                    2 * sequences * stage.lm_head_params,
                    sequences,
                    rates.gemm_bytes_per_s,
                    rates.peak_flop_per_s,
                    rates.gemm_fraction,
                    rates.gemm_half_tokens,
                )
        sampled_bytes = sequences * model.vocab_size * LOGIT_BYTES * SAMPLING_PASSES
        parts["sampling"] += sampled_bytes / rates.elementwise_bytes_per_s
        tp_s, ep_s, pp_s = self._collective_parts_s(tokens)
        parts["tp_all_reduce"] += tp_s
        parts["ep_all_to_all"] += ep_s
        parts["pp_send"] += pp_s
        parts["engine_overhead"] += self.overhead.seconds(sequences, self._kernels)

    def _collectives_s(self, tokens: int) -> float:
        return sum(self._collective_parts_s(tokens))

    def _collective_parts_s(self, tokens: int) -> tuple[float, float, float]:
        """(TP all-reduces, EP dispatch + combine, PP sends) of a step of `tokens` tokens."""
        d, rates, model = self.deployment, self.rates, self.deployment.model
        if d.tp == 1 and d.pp == 1 and not d.ep:
            return 0.0, 0.0, 0.0
        hidden_bytes = tokens * model.hidden_size * ACTIVATION_BYTES
        link, latency = rates.link_bytes_per_s, rates.link_latency_s
        all_reduces = sum(stage.all_reduces for stage in self.totals)
        tp_s = all_reduces * all_reduce_s(hidden_bytes, d.tp, link, latency)
        pp_s = pipeline_sends_s(hidden_bytes, d.pp, link, latency)
        ep_s = 0.0
        if d.ep:
            moe_layers = sum(stage.moe_layers for stage in self.totals)
            k = model.moe.experts_per_token if model.moe else 0
            one = all_to_all_s(hidden_bytes * k, d.expert_shards, link, latency)
            ep_s = 2 * moe_layers * one  # dispatch and combine
        return tp_s, ep_s, pp_s

    def _layer_parts(self, group: LayerGroup, tokens: int, parts: dict[str, float]) -> None:
        rates, n = self.rates, group.count

        def dense(params: float) -> float:
            return n * gemm_s(
                params * group.linear_bytes_per_param,
                2 * tokens * params,
                tokens,
                rates.gemm_bytes_per_s,
                rates.peak_flop_per_s,
                rates.gemm_fraction,
                rates.gemm_half_tokens,
            )

        parts["qkv_proj"] += dense(group.qkv_params)
        parts["out_proj"] += dense(group.out_params)
        parts["mlp"] += dense(group.dense_ffn_params)
        parts["shared_experts"] += dense(group.shared_params)
        if group.num_experts:
            parts["routed_experts"] += n * self._routed_terms_s(
                tokens,
                group.routed_params,
                group.expert_bytes_per_param,
                group.num_experts,
                group.experts_per_token,
            )
        elementwise_bytes = tokens * (group.elementwise_bytes_per_token + self.kv_write_bytes)
        parts["elementwise"] += n * elementwise_bytes / rates.elementwise_bytes_per_s

    def _routed_terms_s(
        self, tokens: int, routed_params: float, bytes_per_param: float, experts: int, k: int
    ) -> float:
        """One MoE layer's routed experts: the touched experts' weights, grouped-GEMM FLOPs.

        Under expert parallelism every data-parallel rank's tokens reach the experts (DP
        attention steps in lockstep), so the layer sees dp × the replica's tokens.
        """
        d, rates = self.deployment, self.rates
        routed_tokens = tokens * (d.dp if d.ep else 1)
        touched = expected_experts_touched(experts, k, routed_tokens)
        return gemm_s(
            routed_params * bytes_per_param * touched / experts,
            2 * routed_tokens * routed_params * k / experts,
            routed_tokens * k / touched,
            rates.grouped_bytes_per_s,
            rates.peak_flop_per_s,
            rates.grouped_fraction,
            rates.grouped_half_tokens,
        )


# Step models built, by (deployment, id(sku), overrides): a SkuSpec holds a dict and cannot be
# hashed, and the model keeps its SKU alive, so an id is not reused while its entry lives.
_MODELS: dict[tuple[object, ...], StepModel] = {}
_MAX_MODELS = 16_384  # a whole-catalogue report builds one per row


def step_model(
    deployment: Deployment,
    sku: SkuSpec,
    constants: PerfConstants | None = None,
    bandwidth_fraction: float | None = None,
    compute_fraction: float | None = None,
    dtype: str | None = None,
    cuda_graphs: bool = True,
    compute_optional: bool = False,
) -> StepModel:
    """The step model of one replica of `deployment` on `sku`, built once.

    `bandwidth_fraction` / `compute_fraction` (None: the fitted constants) replace every
    bandwidth fraction / the large-shape compute fractions (--bandwidth-efficiency,
    --compute-efficiency, a `verify` record's measured bandwidth).
    """
    constants = constants or shipped_constants()
    key = (
        deployment,
        id(sku),
        constants,
        bandwidth_fraction,
        compute_fraction,
        dtype,
        cuda_graphs,
        compute_optional,
    )
    found = _MODELS.get(key)
    if found is None or found.sku is not sku:
        if len(_MODELS) >= _MAX_MODELS:
            _MODELS.clear()
        rates = resolved_rates(
            deployment,
            sku,
            constants,
            bandwidth_fraction,
            compute_fraction,
            dtype,
            cuda_graphs,
            compute_optional,
        )
        found = _MODELS[key] = StepModel(deployment, sku, rates)
    return found
