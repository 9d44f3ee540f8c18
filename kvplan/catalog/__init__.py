"""The only package that reads files: catalogue YAML and Hugging Face config.json."""

from kvplan.catalog.store import Catalog

__all__ = ["Catalog"]
