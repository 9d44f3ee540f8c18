"""The speed model: how long a serving step takes on a SKU."""
