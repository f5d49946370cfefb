"""Serving health and efficiency: engine and GPU signals per allocation, read from Prometheus in
one query per family and stored as 5-minute rollups (then hourly) that pages and the API read."""
