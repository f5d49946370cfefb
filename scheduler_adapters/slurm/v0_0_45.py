"""slurmrestd data parser v0.0.45: served by Slurm 26.05 (Debian "forky": 26.05.5). Same shapes as
v0.0.42 in every field the portal reads and writes; proven by the whole Slurm integration tier
pinned to it against a real 26.05.5 (``slurm-modern.sh`` with ``SLURM_MODERN_SUITE=forky``) and
by the recordings in ``tests/fixtures/slurm/rest_v0.0.45/``. The adapter raises on any "Ignoring
unknown field" warning, so a request field this version dropped cannot pass unnoticed."""

from scheduler_adapters.slurm.modern import ModernDialect

DIALECT = ModernDialect("v0.0.45", epoch_query_times=True)
