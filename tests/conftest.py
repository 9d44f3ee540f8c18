"""Shared fixtures: the shipped catalogue and tiny spec factories."""

from __future__ import annotations

import pytest

from kvplan.catalog import Catalog


@pytest.fixture(scope="session")
def catalog() -> Catalog:
    return Catalog()
