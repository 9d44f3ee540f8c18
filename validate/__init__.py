"""`kvplan verify`: allocate the KV pool kvplan predicts, run the decode kernel, measure, compare.

Modules, one job each:

- ``plan``: what to verify (layers, lengths, per-GPU heads) and every predicted byte count,
  from kvplan's engine formula. Pure Python (no torch).
- ``memory``: the fit check, the pool allocation and its measured bytes, filling the pools.
- ``numerics``: the kernel against the float64 reference on a sample of layers and sequences.
- ``bandwidth``: bytes per decode step, CUDA-event timings, the device-to-device copy ceiling.
- ``environment``: GPU, driver, CUDA, torch, triton, kvplan version and commit.
- ``record``: the JSON record, its verdict and exit code, written atomically.
- ``harness``: ``run_verify``, which runs the steps in order and reports progress.

Only this package (and ``kvplan.kernels``) imports torch and triton; the CLI imports it
inside the ``verify`` command alone, so ``kvplan size`` stays torch-free.
"""
