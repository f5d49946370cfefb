"""Logging filters named in ``LOGGING`` (portal.settings.base)."""

from __future__ import annotations

import logging


class RefusalWithoutTraceback(logging.Filter):
    """A 4xx Django answered from an exception — ``PermissionDenied`` (403), ``BadRequest`` such
    as a page's unreadable query parameter (400), a ``SuspiciousOperation`` (400) — is the portal
    refusing a request it understood, not failing: logged as one WARNING line, without the
    traceback Django attaches. A 5xx keeps its traceback and level."""

    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        if isinstance(status, int) and 400 <= status < 500 and record.exc_info:
            record.exc_info = None
            record.exc_text = None
            if record.levelno > logging.WARNING:
                record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True
