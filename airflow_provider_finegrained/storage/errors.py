"""The storage layer's errors."""

from __future__ import annotations


class StorageError(RuntimeError):
    """A storage location cannot be reached or used as the provider needs."""


class StorageConfigError(ValueError):
    """A storage setting (root, options, Spark classpath) is not usable; the message says what is allowed."""
