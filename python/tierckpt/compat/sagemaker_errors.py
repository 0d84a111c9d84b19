"""The exception classes of ``amzn-sagemaker-checkpointing`` 1.1.3, same names, same hierarchy.

Two families, as in the reference:

* ``SageMakerTieredStorageError`` (checkpointing/filesystem/exceptions.py) and its
  ``SageMakerInMemoryTierError``, ``SageMakerS3TierError``, ``SageMakerTieredStorageConfigError``:
  raised by tierckpt.compat.sagemaker's writer, reader and config. tierckpt's own error is kept as
  ``__cause__``.
* ``InMemoryStorageError`` (storage/clients/inmemory/exceptions.py) and its nine subclasses: the
  reference's HTTP client raises them; tierckpt.compat has no HTTP client, so they are here for code
  that names them in ``except`` clauses (nothing here raises them).

Where tierckpt is stricter than the reference: ``SageMakerTieredStorageConfigError`` is also a
``ValueError`` (a bad argument), so code catching either works (docs/migration-sagemaker.md).
"""
from __future__ import annotations

__all__ = [
    "InMemoryClientError",
    "InMemoryConfigError",
    "InMemoryConnectionError",
    "InMemoryNameSpaceCreateError",
    "InMemoryNamespaceIncompatibleError",
    "InMemoryRequestError",
    "InMemoryResourceNotFoundError",
    "InMemoryServerError",
    "InMemoryStorageError",
    "InMemoryTimeoutError",
    "SageMakerInMemoryTierError",
    "SageMakerS3TierError",
    "SageMakerTieredStorageConfigError",
    "SageMakerTieredStorageError",
]


class SageMakerTieredStorageError(Exception):
    """Base class of every error of the checkpointing writer, reader and config."""


class SageMakerInMemoryTierError(SageMakerTieredStorageError):
    """The memory tier failed: tierckpt's agent refused or lost a save or a read (cause attached)."""


class SageMakerS3TierError(SageMakerTieredStorageError):
    """The durable tier failed: persisting a step, or reading a step the reference wrote to S3."""


class SageMakerTieredStorageConfigError(SageMakerTieredStorageError, ValueError):
    """A bad SageMakerCheckpointConfig (also a ValueError)."""


class InMemoryStorageError(Exception):
    """Base class of the reference's in-memory HTTP client errors."""


class InMemoryConfigError(InMemoryStorageError):
    """The client configuration is invalid."""


class InMemoryConnectionError(InMemoryStorageError):
    """The client could not connect to the service."""


class InMemoryTimeoutError(InMemoryStorageError):
    """A request to the service timed out."""


class InMemoryRequestError(InMemoryStorageError):
    """Another request error (not HTTP, timeout or connection)."""


class InMemoryClientError(InMemoryStorageError):
    """The service answered HTTP 400-499."""


class InMemoryServerError(InMemoryStorageError):
    """The service answered HTTP >= 500."""


class InMemoryResourceNotFoundError(InMemoryStorageError):
    """A resource is not found on the service."""


class InMemoryNamespaceIncompatibleError(InMemoryStorageError):
    """The namespace's configuration does not match the client's."""


class InMemoryNameSpaceCreateError(InMemoryStorageError):
    """Creating the namespace failed."""
