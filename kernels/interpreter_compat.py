"""Loop bounds that are tensors, in Triton 3.6's CPU interpreter under NumPy ≥ 2.4.

The interpreter stores every scalar as a one-element array of shape (1,) and turns it into a
Python int for ``range()`` with ``int(array)``. NumPy 2.4 made ``int()`` of an array with
ndim > 0 a TypeError (numpy 2.4.0 release notes, "Raise TypeError on attempt to convert array
with ndim > 0 to scalar"), so under Triton ≤ 3.6 every ``for ... in range(start, end, step)``
whose bounds are loaded or computed at run time fails with ``InterpreterError:
TypeError('only 0-dimensional arrays can be converted to Python scalars')``. Triton fixed the
conversion upstream (triton-lang/triton#9171); Triton 3.9's interpreter has it.

Only the interpreter is affected: compiled kernels turn such loops into ``scf.for`` and never
call ``int()``. This module checks the interpreter's behaviour on a one-element array and, only
where it fails, replaces that one conversion (restored with the interpreter's other patches
after each launch). It never touches the compiled path.
"""

from __future__ import annotations

import types

import numpy as np


def _index_of_one_element(tensor: object) -> int:
    """``tensor.__index__`` for the interpreter: its single element, whatever its ndim."""
    return int(tensor.handle.data.reshape(()))  # type: ignore[attr-defined]


def interpreter_index_fails() -> bool:
    """Whether this Triton's interpreter cannot turn a shape-(1,) scalar into an int.

    False for interpreters without the patch scope this check drives (older Tritons patch
    tensors another way); those are left alone.
    """
    from triton.runtime import interpreter

    if not hasattr(interpreter, "_LangPatchScope"):
        return False
    probe_type = type("Probe", (), {})
    scope = interpreter._LangPatchScope()
    interpreter._patch_lang_tensor(probe_type, scope)
    try:
        probe = probe_type()
        probe.handle = types.SimpleNamespace(data=np.array([3], dtype=np.int32))
        try:
            return probe.__index__() != 3
        except TypeError:
            return True
    finally:
        scope.restore()


def fix_interpreter_loop_bounds() -> bool:
    """Make tensor loop bounds work in the interpreter where they fail; True if it patched.

    Idempotent. Call only with TRITON_INTERPRET=1 (the compiled path needs nothing).
    """
    from triton.runtime import interpreter

    if getattr(interpreter._patch_lang_tensor, "kvplan_index_fix", False):
        return False
    if not interpreter_index_fails():
        return False
    original = interpreter._patch_lang_tensor

    def patch_lang_tensor(tensor: type, scope: object) -> None:
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", _index_of_one_element)  # type: ignore[attr-defined]

    patch_lang_tensor.kvplan_index_fix = True  # type: ignore[attr-defined]
    interpreter._patch_lang_tensor = patch_lang_tensor
    return True
