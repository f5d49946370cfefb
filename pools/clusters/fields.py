"""The URL fields of a cluster's connections (its API, its Prometheus): Django's URL fields
with :class:`~pools.common.validators.ServiceURLValidator`, so a host of one label
(``http://prometheus:9090``, ``http://slurmrestd:6820``) is taken on the page and in the API
alike, as the environment's ``PROMETHEUS_URL`` and ``SLURM_REST_URL`` take it."""

from __future__ import annotations

from django import forms
from django.db import models

from pools.common.validators import ServiceURLValidator


class ServiceURLFormField(forms.URLField):
    default_validators = [ServiceURLValidator()]


class ServiceURLField(models.URLField):
    default_validators = [ServiceURLValidator()]

    def formfield(self, **kwargs):
        return super().formfield(**{"form_class": ServiceURLFormField, **kwargs})
