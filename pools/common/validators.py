"""Field validators the sub-domains share: node names, slugs, Kubernetes names and one-line
names, dates in the portal's range, service URLs."""

import re
from datetime import date, datetime

from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator, URLValidator
from django.utils.deconstruct import deconstructible

# Patterns end in \Z, not $: "$" also matches before a trailing newline, so "gpu-01\n" passed.

# RFC 1123 host names, plus '_' which Slurm node names allow. No spaces. RFC 1123 §2.1 keeps
# RFC 1035 §2.3.4's lengths: at most 63 characters a label (between dots), 255 octets in all,
# which DNS's length bytes leave at 253 characters of text (RFC 2181 §11). Empty labels
# ("a..b", a trailing dot) are still let through as before: only the lengths are checked.
hostname_validator = RegexValidator(
    r"^(?=.{1,253}\Z)[A-Za-z0-9][A-Za-z0-9_-]{0,62}(?:\.[A-Za-z0-9_-]{0,63})*\Z",
    "A node name is letters, digits, '.', '-' and '_' (no spaces): at most 63 characters "
    "between dots, 253 in all.",
)

# Kubernetes object names of one DNS-1123 label (a Kueue cohort, a Volcano queue, a label value).
dns_label_validator = RegexValidator(
    r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z",
    "Lower-case letters, digits and '-', starting and ending with a letter or digit, at most "
    "63 characters (a DNS-1123 label).",
)

# Kubernetes object names such as a Deployment's: a DNS-1123 subdomain (RFC 1123 labels joined
# by '.', at most 253 characters; Kubernetes' IsDNS1123Subdomain).
dns_subdomain_validator = RegexValidator(
    r"^(?=.{1,253}\Z)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z",
    "Lower-case letters, digits, '-' and '.', starting and ending with a letter or digit, at "
    "most 253 characters (a DNS-1123 subdomain, as Kubernetes names a Deployment).",
)

slug_validator = RegexValidator(r"^[a-z0-9][a-z0-9_-]*\Z", "Lower-case letters, digits, - and _.")

# C0 control characters and DEL (Unicode category Cc below U+0080): never part of a name, a slug
# or a URL path segment. NUL also cannot be stored by PostgreSQL in a text column at all.
CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f]")

# Unicode's explicit bidirectional formatting characters (UAX #9 §2: LRM U+200E, RLM U+200F,
# ALM U+061C, the embeddings and overrides U+202A–U+202E, the isolates U+2066–U+2069). An RLO in a
# team name reverses the text after it wherever the name is shown (a statement PDF's header).
BIDI_CONTROLS = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def single_line_text_validator(value: str) -> None:
    """A name shown on one line (pool, team, GPU model, cost centre): no control characters
    (CR, LF, tab, NUL ...) and no bidirectional formatting marks."""
    if CONTROL_CHARACTERS.search(value):
        raise ValidationError(
            "Control characters (line breaks, tabs, NUL ...) are not allowed in a name.",
            code="control_characters",
        )
    if BIDI_CONTROLS.search(value):
        raise ValidationError(
            "Right-to-left and other bidirectional formatting marks are not allowed in a name.",
            code="bidi_controls",
        )


# Dates the portal takes in and shows: 2000-01-01 to 2100-12-31. Nothing it meters or plans lies
# outside (CUDA itself dates from 2007), and the bound keeps month arithmetic away from date's
# own ends (year 1 has no previous month, year 9999 no next one).
EARLIEST_DATE = date(2000, 1, 1)
LATEST_DATE = date(2100, 12, 31)
DATE_RANGE_MESSAGE = "Dates run from 2000-01-01 to 2100-12-31."


def date_in_range(value: date | datetime) -> bool:
    """Whether ``value`` (a date, or a datetime read by its own calendar date) is in the range."""
    day = value.date() if isinstance(value, datetime) else value
    return EARLIEST_DATE <= day <= LATEST_DATE


def date_range_validator(value: date | datetime) -> None:
    if not date_in_range(value):
        raise ValidationError(DATE_RANGE_MESSAGE, code="date_range")


# Most cards one request, grant or pool auto-approval limit may name: 100,000, the size of the
# largest single GPU clusters published (xAI's Colossus started in 2024 with 100,000 H100s).
# More is a typo, and 2**40 would not fit PostgreSQL's integer column at all.
MAX_REQUEST_CARDS = 100_000
# Longest window a pool may approve without an admin: ten years (3,660 days).
MAX_AUTO_APPROVE_DAYS = 3660


@deconstructible
class ServiceURLValidator(URLValidator):
    """Django's URL check that also takes a host of one label (``http://prometheus:9090``,
    ``http://slurmrestd:6820``: a Docker Compose service, a Kubernetes Service in the same
    namespace, a name the resolver's search domains complete), which Django's takes only as
    ``localhost``. The label starts with a letter, so ``http://12345`` stays refused, and ends
    with a letter or digit, at most 63 characters (RFC 1123 §2.1)."""

    single_label_re = r"[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?"
    host_re = (
        "(" + URLValidator.hostname_re + URLValidator.domain_re + URLValidator.tld_re
        + "|" + single_label_re + ")"
    )  # fmt: skip
    regex = re.compile(
        r"^(?:[a-z0-9.+-]*)://"  # scheme: checked apart, as Django does
        r"(?:[^\s:@/]+(?::[^\s:@/]*)?@)?"  # user:pass
        r"(?:" + URLValidator.ipv4_re + "|" + URLValidator.ipv6_re + "|" + host_re + ")"
        r"(?::[0-9]{1,5})?"  # port
        r"(?:[/?#][^\s]*)?"  # path, query, fragment
        r"\Z",
        re.IGNORECASE,
    )
