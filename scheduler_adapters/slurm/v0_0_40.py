"""slurmrestd data parser v0.0.40: served by Slurm 23.11 through 25.05. Same shapes as v0.0.41
where the portal reads and writes (accounting query times as text), except an association's
``id``, an object here (``{account, cluster, partition, user, id}``), an integer later; the
portal does not read it. Checked against a real 24.11.5 (``tests/fixtures/slurm/rest_v0.0.40/``);
whether 23.11's slurmdbd has ``accounts_association`` under v0.0.40 is not proven here."""

from scheduler_adapters.slurm.modern import ModernDialect

DIALECT = ModernDialect("v0.0.40", epoch_query_times=False)
