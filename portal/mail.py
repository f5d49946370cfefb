"""The demo's e-mail: one log line per message (recipients, subject, attachments), nothing sent.

Django's console backend prints every message whole (headers, body, a statement's PDF in
base64: hundreds of lines in the demo's log); a person trying the portal needs only to see that
a message would have gone, and to whom.
"""

from __future__ import annotations

import logging

from django.core.mail.backends.base import BaseEmailBackend

logger = logging.getLogger("portal.mail")


class SubjectOnlyEmailBackend(BaseEmailBackend):
    """Logs ``e-mail to a@x, b@x: <subject> (1 attachment; not sent)`` at INFO for each message."""

    def send_messages(self, email_messages) -> int:
        for message in email_messages:
            attachments = len(message.attachments)
            logger.info(
                "e-mail to %s: %s (%d attachment%s; not sent)",
                ", ".join(message.recipients()),
                message.subject,
                attachments,
                "" if attachments == 1 else "s",
            )
        return len(email_messages)
