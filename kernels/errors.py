"""Exceptions raised by the kernels package (kept free of kvplan imports)."""


class KernelError(Exception):
    """Base class for errors a caller of ``kvplan.kernels`` can act on."""


class OutOfBlocksError(KernelError):
    """The paged KV cache has fewer free blocks than a request needs.

    Raised before any block is taken, so the cache is unchanged.
    """


class UnknownSequenceError(KernelError):
    """A sequence id the cache does not hold: never allocated, or already freed.

    The message names the id and which of the two it is.
    """
