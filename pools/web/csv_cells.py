"""The one CSV writer every export uses: cells a spreadsheet would run as a formula are escaped.

OWASP's rule for CSV injection (owasp.org/www-community/attacks/CSV_Injection): a cell that
begins with ``=``, ``+``, ``-``, ``@``, a tab (0x09) or a carriage return (0x0D) is opened by Excel,
LibreOffice and Google Sheets as a formula (``=HYPERLINK(...)`` in an imported GPU name, a pool
name or a decision reason); prefixing a single quote makes it text. A plain number (``-12.50``,
a credit) is left as it is, so it stays a number in the sheet; the ``csv`` module quotes what
needs quoting.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

FORMULA_LEADS = ("=", "+", "-", "@", "\t", "\r")
# A decimal number as a spreadsheet reads one: sign, digits, fraction, exponent; nothing else.
_PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?\Z")


def csv_cell(value: Any) -> Any:
    """``value`` as a CSV cell: ``None`` empty, numbers as they are, text escaped when it would
    start a formula (``"=1+1"`` -> ``"'=1+1"``, ``"-5"`` stays ``"-5"``)."""
    if value is None:
        return ""
    if isinstance(value, (int, float, Decimal)) and not isinstance(value, bool):
        return value
    text = str(value)
    if text.startswith(FORMULA_LEADS) and not _PLAIN_NUMBER.match(text):
        return "'" + text
    return text


class SafeCsvWriter:
    """``csv.writer`` over ``stream`` whose rows go through :func:`csv_cell`; ``writerow``
    returns what the stream's ``write`` returned (the line, for a streaming response)."""

    def __init__(self, stream):
        self._writer = csv.writer(stream)

    def writerow(self, row: Iterable[Any]):
        return self._writer.writerow([csv_cell(v) for v in row])

    def writerows(self, rows: Iterable[Iterable[Any]]) -> None:
        for row in rows:
            self.writerow(row)
