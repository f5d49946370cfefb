"""The cluster editor's form: the model's fields and their validators. What fits together,
a taken Slurm ClusterName or Kubernetes API URL and a kind change of a cluster holding pools
are the service's to refuse (:mod:`pools.clusters.services`), as for the API, and come back
as errors of the field they name."""

from __future__ import annotations

from django import forms

from pools.clusters.fields import ServiceURLFormField
from pools.clusters.models import Cluster
from pools.clusters.services import (
    CONNECTION_FIELDS,
    EDITABLE_FIELDS,
    pinned_api_version_validator,
)
from pools.common.choices import CredentialKind

# The fields of the unique constraints: refused by the service with the other cluster named,
# as a field error, not by the model's constraint check as a form-wide one.
_SERVICE_CHECKED = {"kind", "api_url", "slurm_cluster_name", "name"}


class ClusterForm(forms.ModelForm):
    """Create (no instance) or edit a cluster. The slug is fixed once created; a cluster the
    environment variables define keeps its connection fields (shown, not editable); the
    credentials are the path of the file the portal reads, never its content."""

    api_url = ServiceURLFormField(
        label="API URL",
        max_length=255,
        required=False,
        assume_scheme="https",
        help_text=Cluster._meta.get_field("api_url").help_text,
    )

    prometheus_url = ServiceURLFormField(
        label="Prometheus URL",
        max_length=255,
        required=False,
        assume_scheme="https",
        help_text=Cluster._meta.get_field("prometheus_url").help_text,
    )

    class Meta:
        model = Cluster
        fields = list(EDITABLE_FIELDS)
        labels = {
            "slurm_cluster_name": "Slurm ClusterName",
            "slurm_user": "Slurm user",
            "credential_kind": "Credentials",
            "credential_path": "Credentials file path",
            "ca_path": "CA bundle path",
            "kube_context": "Kubeconfig context",
            "api_version": "API version pin",
            "kueue": "Kueue",
            "retiring": "Retiring",
        }
        help_texts = {
            "slug": "Fixed once created.",
            "time_zone": "IANA name, e.g. Europe/Berlin.",
            "api_version": "e.g. v0.0.42; empty: the newest both know.",
        }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        from_environment = self.instance.pk is not None and self.instance.from_environment
        self.fields["credential_kind"].choices = [
            (value, label)
            for value, label in CredentialKind.choices
            if value != CredentialKind.ENVIRONMENT or from_environment
        ]
        if self.instance.pk is not None:
            self.fields["slug"].disabled = True
        if from_environment:
            for name in CONNECTION_FIELDS:
                self.fields[name].disabled = True
                self.fields[name].help_text = "From the environment variables."

    def clean_api_version(self) -> str:
        value = self.cleaned_data["api_version"]
        if value != self.instance.api_version:  # a stored pin is the check's to mark
            pinned_api_version_validator(value)
        return value

    def _get_validation_exclusions(self):
        return {*super()._get_validation_exclusions(), *_SERVICE_CHECKED}

    def editable_values(self) -> dict:
        """The cleaned values of the fields this form may change (not the disabled ones)."""
        return {
            name: value
            for name, value in self.cleaned_data.items()
            if not self.fields[name].disabled
        }
