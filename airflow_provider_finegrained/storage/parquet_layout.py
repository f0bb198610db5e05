"""How parquet files on a storage location are cut into row groups, from their footers.

Spark splits a scan at byte offsets but reads whole row groups: a task gets the row groups whose
midpoint falls in its split. Files the provider's producers wrote have the row-group size it chose;
files from elsewhere (a source table) have whatever their writer used (pyarrow, Spark, DuckDB...), so the
scan balance reads it instead of assuming it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from airflow_provider_finegrained.storage.filesystem import StorageOptions, filesystem
from airflow_provider_finegrained.storage.locations import redact

log = logging.getLogger(__name__)

MAX_FOOTERS = 32
"""Footers read per input at most (the largest files first): one small ranged read each."""


def largest_row_group_bytes(
    files: Sequence[str], storage_options: StorageOptions = None, *, limit: int = MAX_FOOTERS
) -> int | None:
    """The largest row group's bytes on disk over the parquet ``files`` (URLs or paths, largest files
    first); None when none could be read (not parquet, unreadable: the caller keeps its assumption)."""
    import pyarrow.parquet as pq

    largest: int | None = None
    for location in list(files)[: max(0, limit)]:
        try:
            fs, path = filesystem(location, storage_options)
            with fs.open(path, "rb") as handle:
                meta = pq.ParquetFile(handle).metadata
        except Exception as exc:  # a footer is a hint: any failure keeps the assumption
            log.info("row groups of %s not read (%s): assuming the provider's producers' size", redact(location), exc)
            continue
        for i in range(meta.num_row_groups):
            group = meta.row_group(i)
            size = sum(group.column(j).total_compressed_size for j in range(group.num_columns))
            largest = size if largest is None else max(largest, size)
    return largest
