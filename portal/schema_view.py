"""``/api/schema/``: drf-spectacular's view, safe under a threaded server.

Kept apart from :mod:`portal.openapi`, which drf-spectacular imports (``DEFAULT_SCHEMA_CLASS``)
while its own views module is loading.
"""

from __future__ import annotations

import threading

from drf_spectacular.views import SpectacularAPIView

# drf-spectacular's generator is not thread-safe: each view class's schema object is shared
# and told which view instance it describes while the document is built, so two requests
# building the document at once in one process (a threaded server's first page of the API
# docs) can read each other's view and answer 500 (drf-spectacular issues #1122 / #1123).
_SCHEMA_GENERATION = threading.Lock()


class SchemaView(SpectacularAPIView):
    """``/api/schema/``: drf-spectacular's view, building one document at a time per process."""

    def _get_schema_response(self, request):
        with _SCHEMA_GENERATION:
            return super()._get_schema_response(request)
