"""A batch of sequences as (length, count) pairs: never one entry per sequence.

A million identical requests are one pair, so sizing costs the same at batch 1 and 10^6.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import kvplan.limits as limits
from kvplan.errors import KvplanError


@dataclass(frozen=True)
class Batch:
    """Sequences by length: `counts` holds (tokens, sequences of that length), sorted."""

    counts: tuple[tuple[int, int], ...]

    def __post_init__(self) -> None:
        if not self.counts:
            raise KvplanError("--batch: at least one sequence is needed")
        for tokens, count in self.counts:
            if tokens < 1:
                raise KvplanError(f"--context: {tokens} must be at least 1 token")
            limits.CONTEXT.check(tokens, "--context")
            if count < 1:
                raise KvplanError(f"--batch: {count} must be at least 1 sequence")
        limits.BATCH.check(self.size, "--batch")

    @classmethod
    def uniform(cls, tokens: int, count: int = 1) -> Batch:
        """`count` sequences of `tokens` tokens each."""
        return cls(((tokens, count),))

    @classmethod
    def of(cls, lengths: Iterable[int]) -> Batch:
        """A ragged batch from one length per sequence."""
        return cls(tuple(sorted(Counter(lengths).items())))

    @property
    def size(self) -> int:
        """Number of sequences."""
        return sum(count for _, count in self.counts)

    @property
    def longest(self) -> int:
        return self.counts[-1][0]

    @property
    def shortest(self) -> int:
        return self.counts[0][0]

    @property
    def is_uniform(self) -> bool:
        return len(self.counts) == 1

    @property
    def total_tokens(self) -> int:
        return sum(tokens * count for tokens, count in self.counts)

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return iter(self.counts)

    def per_replica(self, replicas: int) -> Batch:
        """The share one of `replicas` data-parallel replicas serves (the largest share)."""
        if replicas == 1:
            return self
        return Batch(tuple((tokens, -(-count // replicas)) for tokens, count in self.counts))
