"""Idle detection and reclamation: pure evaluation (no ORM) of dcgm-exporter utilisation."""
