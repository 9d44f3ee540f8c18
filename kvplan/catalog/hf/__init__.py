"""Hugging Face `config.json` -> ModelSpec, with the reading taken of every ambiguous field.

Configs are where KV calculators go wrong by 8x-71x: a `head_dim` that is not
hidden/heads (Gemma), `multi_query: true` with no KV head count (Falcon), a
`sliding_window` that may or may not apply to every layer (Mistral, Qwen2), MLA
configs whose `num_key_value_heads` is not what is cached (DeepSeek). Each
family is one small function that reads its config the way transformers
builds the model, and says so in a warning whenever it had to choose.

One file per job:
    importer      the entry points (`import_hf`, `spec_from_hf_config`) and `HfImport`
    files         the only I/O: reading `config.json` and `model.safetensors.index.json`
    fields        typed field reads (`_Config`) and the fields llama-like configs share
    layers        layer plans: full, sliding, chunked and state layers, and windows
    quantization  the weight dtype implied by `quantization_config`
    dense, learned, moe, hybrid   one function per family, grouped by how the layer stack is built
    families      the `model_type` -> family table
"""

from kvplan.catalog.hf.families import SUPPORTED_MODEL_TYPES
from kvplan.catalog.hf.files import CONFIG_FILE, INDEX_FILE
from kvplan.catalog.hf.importer import HfImport, import_hf, spec_from_hf_config

__all__ = [
    "CONFIG_FILE",
    "INDEX_FILE",
    "SUPPORTED_MODEL_TYPES",
    "HfImport",
    "import_hf",
    "spec_from_hf_config",
]
