"""Measured against sized: serving rollups (:mod:`pools.serving`) set against the sizing
engine (:mod:`pools.sizing`), kept as calibration records by a beat task."""
