"""Waiting work (issue #33 item 2): each team's pending Slurm jobs and not-admitted Kueue
workloads, read by a task every minute while someone looks, stored as ``PendingWork`` rows and
explained in the portal's words (:mod:`pools.waiting.translate`)."""
