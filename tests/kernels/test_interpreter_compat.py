"""Loop bounds that are tensors run in the Triton interpreter, under Triton 3.6 and 3.9.

Triton 3.6's interpreter turns a scalar into an int with ``int(array)``, which NumPy ≥ 2.4
refuses for its shape-(1,) scalars (numpy 2.4.0 release notes); kvplan.kernels replaces that
one conversion where, and only where, it fails. CI runs this file under both versions.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from kvplan.kernels import decode_kernels  # noqa: F401  (applies the fix on import)
from kvplan.kernels.interpreter_compat import fix_interpreter_loop_bounds, interpreter_index_fails

pytestmark = pytest.mark.skipif(
    torch.cuda.is_available(), reason="checks the CPU interpreter (TRITON_INTERPRET=1)"
)


@triton.jit
def _count_tiles(bounds_ptr, out_ptr, STEP: tl.constexpr):
    start = tl.load(bounds_ptr)
    end = tl.load(bounds_ptr + 1)
    count = 0
    for _ in range(start, end, STEP):  # run-time bounds: the construct that failed
        count += 1
    tl.store(out_ptr, count)


def test_loop_with_loaded_bounds_runs():
    bounds = torch.tensor([5, 47], dtype=torch.int32)
    out = torch.zeros(1, dtype=torch.int32)
    _count_tiles[(1,)](bounds, out, STEP=8)
    assert out.item() == len(range(5, 47, 8))  # 6


def test_fix_applies_exactly_where_the_interpreter_fails():
    from triton.runtime import interpreter

    major_minor = tuple(int(part) for part in triton.__version__.split(".")[:2])
    numpy_major_minor = tuple(int(part) for part in np.__version__.split(".")[:2])
    patched = getattr(interpreter._patch_lang_tensor, "kvplan_index_fix", False)
    if major_minor == (3, 6) and numpy_major_minor >= (2, 4):
        assert patched  # the failing combination, seen with triton 3.6.0 and numpy 2.4
    if major_minor >= (3, 9):
        assert not patched  # fixed upstream: nothing to replace
    assert not interpreter_index_fails()
    assert fix_interpreter_loop_bounds() is False  # idempotent
