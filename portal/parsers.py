"""The API's JSON parser: DRF's, with the body's nesting bounded.

Its own module, importing only DRF's parsers and exceptions: DRF imports its
``DEFAULT_PARSER_CLASSES`` while ``rest_framework.views`` is still loading, so a parser in
:mod:`portal.api` (which imports the views) would be a circular import.
"""

from __future__ import annotations

import io

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from scheduler_adapters.documents import MAX_DEPTH, bracket_depth


class BoundedJSONParser(JSONParser):
    """DRF's JSON parser, refusing a body nested deeper than
    :data:`scheduler_adapters.documents.MAX_DEPTH` (64) levels with a 400 ``parse_error``.

    Python's decoder recurses once per ``[`` or ``{``: a body of a few thousand of them raised
    ``RecursionError``, a 500 from every API operation that reads a body. No body the API
    takes comes near 64 levels (an estimate with a custom architecture is the deepest, about
    4). Brackets inside strings do not count. A body that is not text in its declared charset
    is left to DRF's parser, which answers its own 400.
    """

    def parse(self, stream, media_type=None, parser_context=None):
        raw = stream.read() if stream is not None else b""
        encoding = (parser_context or {}).get("encoding") or "utf-8"
        try:
            text = raw.decode(encoding)
        except (LookupError, UnicodeDecodeError):
            text = ""
        if bracket_depth(text) > MAX_DEPTH:
            raise ParseError(
                f"JSON parse error - the body is nested deeper than {MAX_DEPTH} levels."
            )
        return super().parse(io.BytesIO(raw), media_type, parser_context)
