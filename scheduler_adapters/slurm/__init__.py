"""Slurm: parsers for what slurmrestd and the Slurm commands print (nodes, GRES, TRES, numbers)."""
