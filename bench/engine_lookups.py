"""How often one `kvplan.size()` call re-derives engine inputs (numbers go in notes).

Usage: python bench/engine_lookups.py [--version 0.11]
Counts, with a profile hook on Python calls, the KV-dtype lookups (specs.kv_dtype_info), the
vLLM version parses (a given version is parsed by vllm_version.parse_version) and the
scheduler-default resolutions (vllm_memory.scheduler_defaults) of one size call of
Llama-3.1-70B, 128k × 8, TP 8 on an H100 SXM, after a warm-up call (catalogue read).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter

import kvplan

WATCH = {
    ("dtypes.py", "kv_dtype_info"): "KV-dtype lookups",
    ("vllm_version.py", "parse_version"): "vLLM version parses",
    ("vllm_memory.py", "scheduler_defaults"): "scheduler resolutions",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", default="0.11", help="--engine-version to plan with")
    args = parser.parse_args()
    plan = {"context": "128k", "batch": 8, "tp": 8, "sku": "h100-sxm", "version": args.version}
    kvplan.size("llama-3.1-70b", **plan)
    counts: Counter[str] = Counter()

    def hook(frame, event, arg):  # type: ignore[no-untyped-def]
        if event == "call":
            code = frame.f_code
            name = WATCH.get((code.co_filename.rsplit("/", 1)[-1], code.co_name))
            if name is not None:
                counts[name] += 1

    sys.setprofile(hook)
    kvplan.size("llama-3.1-70b", **plan)
    sys.setprofile(None)
    for name in dict.fromkeys(WATCH.values()):
        print(f"{name}: {counts[name]}")


if __name__ == "__main__":
    main()
