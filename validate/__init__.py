"""`kvplan verify`: allocate the KV pool kvplan predicts, run the decode kernel, measure, compare.

Modules, one job each:

- ``verify_plan``: ``VerifyPlan``, one GPU's share of the plan and every predicted byte count.
- ``plan``: ``build_plan``, and the only two calls into ``kvplan.plan`` (the engine model):
  ``engine_kv_prediction`` and ``capacity_prediction``. Pure Python (no torch).
- ``allocator_rules``: PyTorch's CUDA caching allocator, replayed (pure Python).
- ``device_memory``: what the driver and the allocator report around an allocation.
- ``memory_check``: those reports against the plan replayed through the rules.
- ``memory``: the fit check, the pool allocation and its measurement; ``fill``: pool contents.
- ``numerics``: the kernel against the float64 reference on a sample of layers and sequences.
- ``traffic``: bytes one step moves, unique and issued; ``shortfall``: why a step missed.
- ``bandwidth``: CUDA-event timings, the L2 flush, the device-to-device copy ceiling.
- ``capacity`` and ``capacity_run``: ``--capacity``, the planner's budget by allocation.
- ``environment``: GPU, driver, CUDA, torch, triton, kvplan version and commit.
- ``record``, ``record_memory``, ``record_bandwidth``: the JSON record, its verdict, the file.
- ``harness``: ``run_verify``, which runs the steps in order and reports progress.

Only this package (and ``kvplan.kernels``) imports torch and triton; the CLI imports it
inside the ``verify`` command alone, so ``kvplan size`` stays torch-free.
"""
