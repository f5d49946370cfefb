"""slurmrestd data parser v0.0.42: served by Slurm 24.11 (Debian 13 "trixie": 24.11.5), 25.05,
25.11 and 26.05, so the one version that spans every release sites run in 2026. Proven against a
real 24.11.5 in the integration tier (``scripts/services/slurm-modern.sh``)."""

from scheduler_adapters.slurm.modern import ModernDialect

DIALECT = ModernDialect("v0.0.42", epoch_query_times=True)
