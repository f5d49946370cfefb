"""Words for the elastic pages: a decision's reason code and its ISO time."""

from datetime import datetime

from django import template
from django.utils import timezone

from pools.elastic.policy import REASON_LABELS

register = template.Library()


@register.filter
def scale_reason(code: str) -> str:
    """``scale_up`` -> "load high", ``hand_back`` -> "handed back"; a code without a label (a
    newer one) in words: ``some_new_code`` -> "some new code", so it wraps between words."""
    return REASON_LABELS.get(code, code.replace("_", " "))


@register.filter
def iso_time(value: str) -> str:
    """An ISO 8601 timestamp (as stored in a decision) as ``YYYY-MM-DD HH:MM`` in the page's
    time zone with its abbreviation; the text as it is when it is not a timestamp."""
    try:
        moment = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        return value
    if timezone.is_naive(moment):
        return value
    return timezone.localtime(moment).strftime("%Y-%m-%d %H:%M %Z")
