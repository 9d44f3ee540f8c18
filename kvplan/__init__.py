"""kvplan: exact KV-cache sizing, per-GPU capacity and on-device verification."""

__version__ = "0.1.0"
