"""Clients for the systems that really hold GPUs: Slurm, Kubernetes and Prometheus.

This package knows no Django app: it returns plain frozen dataclasses from
:mod:`scheduler_adapters.types` and raises errors from :mod:`scheduler_adapters.errors`.
"""
