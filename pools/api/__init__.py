"""REST API of the inventory (``/api/v1/``): thin viewsets over selectors and services."""
