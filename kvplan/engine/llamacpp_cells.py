"""How llama.cpp turns -c / -np into cells, by build: padding, streams, SWA caches, MLA rows.

Read from ggml-org/llama.cpp `src/llama-context.cpp`, `src/llama-kv-cache.cpp` (earlier
`llama-kv-cache-unified.cpp`, `llama.cpp`) and `src/llama-kv-cache-iswa.cpp`. Each rule is
keyed to the first build after the PR that introduced it (build numbers approximate: kvplan
maps a PR's merge date to the builds tagged then):

| from build | rule |
|---|---|
| (2023) | n_ctx cells exactly, one buffer for all sequences |
| b1601, PR #4280 (2023-12-02) | n_ctx padded to 32 (256 with flash attention, PR #6374 / #7257) |
| b5440, PR #13194 (2025-05) | sliding layers keep min(n_ctx, pad(n_swa · n_seq + n_ubatch)) cells |
| b5940, PR #14363 (2025-07) | a stream per slot unless --kv-unified: pad(⌈n_ctx / n_seq⌉) cells |
| b6860, PR #16812 (2025-10-28) | no padding of the cache size |
| b6970, PR #17046 (2025-11-07) | cells per stream padded to 256 (-c 1024 -np 3 → 1536 cells) |
| b6075, PR #15050 (2025-08-03) | hybrid models: a stream per slot, each of all n_ctx cells |
| b8005, PR #19559 (2026-02-12) | hybrid models: ⌈n_ctx / n_seq⌉ cells a stream, as others |

Sliding layers per stream: min(cells, n_swa · (sequences sharing the stream) + n_ubatch),
padded like the cells; from b6970 pad256 of that minimum (issue #17037).

MLA (DeepSeek-V2/V3, `deepseek2`): before PR #12801 (b5140, 2025-04) K and V per head
(n_head · (qk_nope + qk_rope), n_head · v_head_dim); then one latent K of kv_lora_rank +
qk_rope and V of kv_lora_rank; from PR #19067 (b7830, 2026-01-24) no V buffer.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.kvmath import ceil_div
from kvplan.specs import WINDOWED_KINDS

CELL_PAD_FLASH = 256  # llama_kv_cache_get_padding(): flash attention
CELL_PAD = 32
STREAMS_BUILD = 5940
SWA_CACHE_BUILD = 5440
NO_PAD_BUILD = 6860
PAD_256_BUILD = 6970
PAD_BUILD = 1601
MLA_LATENT_BUILD = 5140
MLA_NO_V_BUILD = 7830
HYBRID_STREAMS_BUILD = 6075  # PR #15050 "memory : handle kv_unified for hybrid models"
HYBRID_STREAMS_FIX_BUILD = 8005  # PR #19559 "memory : fix kv cache size for hybrid models"
FLASH_AUTO_BUILD = 6300  # -fa auto (on where the backend supports it), Aug/Sep 2025
DEFAULT_UBATCH_TOKENS = 512
DEFAULT_BATCH_TOKENS = 2048  # common/common.h n_batch


def physical_batch_tokens(n_ctx: int | None, batch: int | None, ubatch: int | None) -> int:
    """The n_ubatch a context runs with, in tokens: llama-context.cpp sets n_batch =
    min(n_ctx, -b) for causal models, then n_ubatch = min(n_batch, -ub). `-b 256` halves the
    default 512; so does `-c 256`. It sizes the SWA cells (n_swa + n_ubatch) and the graph the
    compute buffers are reserved for (min(n_ctx, n_ubatch) tokens)."""
    logical = batch or DEFAULT_BATCH_TOKENS
    if n_ctx is not None:
        logical = min(logical, n_ctx)
    return min(logical, ubatch or DEFAULT_UBATCH_TOKENS)


def pad(value: int, multiple: int) -> int:
    """GGML_PAD: `value` rounded up to a multiple of `multiple`."""
    return ceil_div(value, multiple) * multiple


@dataclass(frozen=True)
class CellRules:
    """The cell rules of one build with the user's switches."""

    build: int
    flash_attention: bool
    unified: bool
    swa_full: bool
    ubatch_tokens: int = DEFAULT_UBATCH_TOKENS

    @property
    def has_streams(self) -> bool:
        return self.build >= STREAMS_BUILD

    def streams(self, n_seq: int) -> int:
        """Buffers along the stream axis: one per sequence unless unified (or before them)."""
        return 1 if self.unified or not self.has_streams else n_seq

    def _padding(self) -> int:
        if self.build < PAD_BUILD or NO_PAD_BUILD <= self.build < PAD_256_BUILD:
            return 1
        if self.build >= PAD_256_BUILD:
            return 256
        return CELL_PAD_FLASH if self.flash_attention else CELL_PAD

    def cells_per_stream(self, n_ctx: int, n_seq: int) -> int:
        """Cells of one stream for -c n_ctx -np n_seq (the `cells` of the log line)."""
        multiple = self._padding()
        streams = self.streams(n_seq)
        if self.build >= PAD_256_BUILD:
            return pad(pad(n_ctx, 256) // streams, 256)
        if streams > 1:
            # b5940 – b6969, llama-model.cpp create_memory: n_ctx_per_stream =
            # (n_ctx + n_seq_max - 1) / n_seq_max, then GGML_PAD(…, padding): the division
            # rounds up before the padding. -c 4096 -np 3: ⌈4096 / 3⌉ = 1366 → 1536 cells
            # with flash attention (pad 256), 1376 without (pad 32); 1366 from b6860 (no pad).
            return pad(ceil_div(n_ctx, streams), multiple)
        return pad(n_ctx, multiple)

    def swa_cells_per_stream(self, n_ctx: int, n_seq: int, window_tokens: int) -> int:
        """Cells a sliding layer keeps per stream (iSWA cache), or all of them."""
        base = self.cells_per_stream(n_ctx, n_seq)
        if self.swa_full or self.build < SWA_CACHE_BUILD:
            return base
        sequences = n_seq if self.streams(n_seq) == 1 else 1
        wanted = window_tokens * sequences + self.ubatch_tokens
        if self.build >= PAD_256_BUILD:
            return pad(min(base, wanted), 256)
        return min(base, pad(wanted, self._padding()))


@dataclass(frozen=True)
class LayerRow:
    """One layer's bytes per cell in llama.cpp's buffers, and where the layer lives."""

    kind: str  # full | sliding | chunked | state | none
    k_bytes: int  # one cell of K
    v_bytes: int  # one cell of V (0: V-less MLA)
    window_tokens: int = 0
    state_bytes: int = 0  # recurrent state per sequence (r and s rows, f32)
    device: str = "CUDA0"  # buffer the layer's cache lives in: CUDA<i> or CPU

    @property
    def is_windowed(self) -> bool:
        """Whether the layer lives in the SWA cache (sliding and chunked layers)."""
        return self.kind in WINDOWED_KINDS

    @property
    def keeps_cells(self) -> bool:
        """Whether the layer holds K/V cells at all (recurrent and mixer-less layers do not)."""
        return self.kind not in ("state", "none")


@dataclass(frozen=True)
class Buffer:
    """K and V bytes of one buffer type (device) for one allocation."""

    device: str
    k_bytes: int
    v_bytes: int
    state_bytes: int = 0

    @property
    def kv_bytes(self) -> int:
        return self.k_bytes + self.v_bytes


@dataclass(frozen=True)
class Allocation:
    """What -c n_ctx -np n_seq allocates: cells, streams and bytes per device."""

    n_ctx: int  # after rounding
    n_seq: int
    streams: int
    cells: int  # per stream, full layers
    swa_cells: int  # per stream, sliding layers (= cells when there are none or --swa-full)
    full_layers: int
    swa_layers: int
    buffers: tuple[Buffer, ...]

    @property
    def k_bytes(self) -> int:
        return sum(b.k_bytes for b in self.buffers)

    @property
    def v_bytes(self) -> int:
        return sum(b.v_bytes for b in self.buffers)

    def bytes_on(self, device_prefix: str) -> int:
        """KV + state bytes in buffers whose name starts with `device_prefix`."""
        return sum(
            b.kv_bytes + b.state_bytes for b in self.buffers if b.device.startswith(device_prefix)
        )

    @property
    def n_ctx_seq(self) -> int:
        """Tokens one slot may hold (llama-server's n_ctx_slot = n_ctx / n_seq)."""
        return self.n_ctx // self.n_seq


def hybrid_cells_per_stream(
    rows: tuple[LayerRow, ...], rules: CellRules, n_ctx: int, n_seq: int
) -> int | None:
    """Cells of each stream of a hybrid model's attention cache in the builds that gave
    every stream the whole n_ctx, or None where the usual rule holds.

    llama-model.cpp `create_memory` passed the hybrid memory `attn_kv_size = cparams.n_ctx`
    (not n_ctx / n_seq) and, from PR #15050, `unified = cparams.kv_unified`: without
    --kv-unified that is n_seq streams of n_ctx cells each, "-np times more KV cache for
    hybrid models" until PR #19559 passed `cparams.n_ctx_seq`.
    """
    hybrid = any(r.kind == "state" for r in rows) and any(r.keeps_cells for r in rows)
    in_builds = HYBRID_STREAMS_BUILD <= rules.build < HYBRID_STREAMS_FIX_BUILD
    if not (hybrid and in_builds and rules.streams(n_seq) > 1):
        return None
    return rules.cells_per_stream(n_ctx, 1)


def allocate(rows: tuple[LayerRow, ...], rules: CellRules, n_ctx: int, n_seq: int) -> Allocation:
    """The buffers llama.cpp allocates for -c n_ctx -np n_seq under `rules`."""
    streams = rules.streams(n_seq)
    hybrid_cells = hybrid_cells_per_stream(rows, rules, n_ctx, n_seq)
    cells = hybrid_cells or rules.cells_per_stream(n_ctx, n_seq)
    windows = {r.window_tokens for r in rows if r.is_windowed}
    window = max(windows, default=0)
    swa_cells = rules.swa_cells_per_stream(n_ctx, n_seq, window) if windows else cells
    totals: dict[str, list[int]] = {}
    for row in rows:
        kept = (swa_cells if row.is_windowed else cells) if row.keeps_cells else 0
        k, v, state = totals.setdefault(row.device, [0, 0, 0])
        totals[row.device] = [
            k + row.k_bytes * kept * streams,
            v + row.v_bytes * kept * streams,
            state + row.state_bytes * n_seq,
        ]
    buffers = tuple(Buffer(device, *values) for device, values in totals.items())
    return Allocation(
        n_ctx=rules.cells_per_stream(n_ctx, n_seq) * streams if hybrid_cells else cells * streams,
        n_seq=n_seq,
        streams=streams,
        cells=cells,
        swa_cells=swa_cells,
        full_layers=sum(r.kind == "full" for r in rows),
        swa_layers=sum(r.is_windowed for r in rows),
        buffers=buffers,
    )


@dataclass(frozen=True)
class Plan:
    """Everything a llama.cpp launch allocates from: rows, rules and the fixed -c / -np."""

    rows: tuple[LayerRow, ...]
    rules: CellRules
    type_k: str
    type_v: str
    context_size_tokens: int | None  # -c; None: planned per request
    parallel: int  # -np (fixed plans)
    gpus: int

    def allocation(self, n_ctx: int, n_seq: int) -> Allocation:
        return allocate(self.rows, self.rules, n_ctx, n_seq)

    def slot_bytes(self, tokens: int, device: str) -> int:
        """Bytes one slot sized for `tokens` (-c tokens -np 1) takes on `device`."""
        return self.allocation(tokens, 1).bytes_on(device)

    @property
    def fixed(self) -> Allocation | None:
        if self.context_size_tokens is None:
            return None
        return self.allocation(self.context_size_tokens, self.parallel)
