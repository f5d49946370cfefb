"""Big inventory files imported in the background, with progress.

A file over ``INVENTORY_ASYNC_IMPORT_BYTES`` (default 1 MiB: a slurmrestd answer for ~1,000
nodes, a few seconds to import) would hold a web worker for as long as it takes, up to the
request deadline (``REQUEST_TIMEOUT_S``, issue #27). Such a file is checked the cheap way in the
request (source, size limit, empty, node name for nvidia-smi), kept as an
:class:`InventoryUpload` row and imported by a Celery task queued through the outbox
(``pools.jobs``): the page polls it (htmx) and the API answers 202 with its status URL. Smaller
files are imported in the request as before.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from pools.common.choices import EstimateStatus
from pools.common.errors import DomainError, InvalidInput, NotFound, UploadTooLarge
from pools.inventory.models import InventoryUpload, Pool
from pools.inventory.services.import_files import inventory_parse_file
from pools.inventory.services.importer import inventory_import
from pools.jobs import INVENTORY_UPLOAD, enqueue_on_commit
from scheduler_adapters.types import InventorySource

logger = logging.getLogger(__name__)


def inventory_import_in_background(size: int) -> bool:
    """Whether a file of ``size`` bytes is imported by a task rather than in the request."""
    return size > settings.INVENTORY_ASYNC_IMPORT_BYTES


def inventory_upload_queue(
    *,
    data: bytes,
    source: InventorySource | str,
    node: str | None = None,
    pool: Pool | None = None,
    actor: Any | None = None,
    filename: str = "",
) -> InventoryUpload:
    """Keep the file and queue its import; return the pending upload.

    Raises :class:`InvalidInput` (nothing kept) for what can be told without parsing: an
    unknown source, a file over ``INVENTORY_UPLOAD_MAX_BYTES`` (:class:`UploadTooLarge`), an
    empty file, nvidia-smi output without its node. What parsing finds is in the report.
    """
    try:
        source = InventorySource(source)
    except ValueError:
        choices = ", ".join(s.value for s in InventorySource)
        raise InvalidInput(
            f"Unknown source {source!r}; use one of: {choices}.", field="source"
        ) from None
    label, limit = filename or "The file", settings.INVENTORY_UPLOAD_MAX_BYTES
    if len(data) > limit:
        raise UploadTooLarge(
            f"{label} is {len(data):,} bytes; the limit is {limit:,} bytes.",
            field="file", size=len(data), limit=limit,
        )  # fmt: skip
    if not data.strip():
        raise InvalidInput(f"{label} is empty.", field="file")
    if source == InventorySource.NVIDIA_SMI and not (node and node.strip()):
        raise InvalidInput(
            "nvidia-smi output needs the name of the node it came from.", field="node"
        )
    with transaction.atomic():
        upload = InventoryUpload.objects.create(
            source=str(source),
            node=(node or "").strip(),
            pool=pool,
            filename=filename[:255],
            actor=actor if getattr(actor, "is_authenticated", False) else None,
            data=data,
        )
        enqueue_on_commit(INVENTORY_UPLOAD, upload.pk)
    return upload


def inventory_upload_run(*, upload_id: int) -> InventoryUpload:
    """Import a pending (or interrupted, still running) upload; done or failed at the end.

    Idempotent: a done or failed upload is returned as it is (a redelivered task does nothing);
    an interrupted one starts again (the importer's writes are idempotent: an imported node
    reads as unchanged). :class:`NotFound` when the row is gone.
    """
    with transaction.atomic():
        upload = InventoryUpload.objects.select_for_update().filter(pk=upload_id).first()
        if upload is None:
            raise NotFound(f"No inventory upload #{upload_id}.", id=upload_id)
        if upload.status in (EstimateStatus.DONE, EstimateStatus.FAILED):
            return upload
        upload.status, upload.progress = EstimateStatus.RUNNING, 0
        upload.save(update_fields=["status", "progress"])

    def progress(done: int, total: int) -> None:
        percent = min(99, done * 100 // max(total, 1))
        InventoryUpload.objects.filter(pk=upload_id).update(progress=percent)

    report = error = None
    try:
        parsed = inventory_parse_file(
            data=bytes(upload.data), source=upload.source, node=upload.node or None,
            filename=upload.filename,
        )  # fmt: skip
        InventoryUpload.objects.filter(pk=upload_id).update(progress=1)
        report = inventory_import(
            result=parsed, source=InventorySource(upload.source), pool=upload.pool,
            actor=upload.actor, filename=upload.filename, on_progress=progress,
        ).as_dict()  # fmt: skip
    except DomainError as exc:
        error = exc.message
    except Exception as exc:  # a bug must not leave the upload running for ever
        logger.exception("inventory upload %s failed", upload_id)
        error = f"The import failed with an internal error ({type(exc).__name__}); see the logs."
    InventoryUpload.objects.filter(pk=upload_id).update(
        status=EstimateStatus.FAILED if error else EstimateStatus.DONE,
        progress=100,
        report=report,
        error=error or "",
        data=b"",
        finished_at=timezone.now(),
    )
    upload.refresh_from_db()
    return upload
