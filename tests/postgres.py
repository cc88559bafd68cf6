"""The throwaway PostgreSQL cluster (bench/_postgres.py, shared with the benchmarks), under
the name the test suite imports it by."""

from bench._postgres import (
    SERVER_USER,
    SKIP_ENV,
    SUPERUSER,
    Cluster,
    binaries,
    cluster,
    free_port,
    skipped,
)

__all__ = [
    "SERVER_USER",
    "SKIP_ENV",
    "SUPERUSER",
    "Cluster",
    "binaries",
    "cluster",
    "free_port",
    "skipped",
]
