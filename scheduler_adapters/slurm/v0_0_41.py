"""slurmrestd data parser v0.0.41: served by Slurm 24.05, 24.11 and 25.05. Same shapes as
v0.0.42 in every field the portal reads or writes, except accounting query times (sacct's
text format here, epoch seconds in v0.0.42) (compared field by field on a real 24.11.5:
``tests/fixtures/slurm/rest_v0.0.41/``); the integration tier can be run on it with
``SLURM_API_VERSION=v0.0.41``."""

from scheduler_adapters.slurm.modern import ModernDialect

DIALECT = ModernDialect("v0.0.41", epoch_query_times=False)
