"""API shapes of clusters. Credentials appear only as the path the portal reads them from."""

from __future__ import annotations

from django.core.validators import URLValidator
from rest_framework import serializers

from pools.clusters import selectors
from pools.clusters.fields import ServiceURLField
from pools.clusters.models import SUMMARY_STATUSES, Cluster
from pools.clusters.services import EDITABLE_FIELDS, pinned_api_version_validator
from pools.common.choices import CredentialKind
from pools.common.validators import ServiceURLValidator

STATUS_FIELDS = (
    "status",
    "status_reason",
    "api_version_served",
    "checked_at",
    "reachable_at",
    "check_requested_at",
    "check_started_at",
)
# Health (issue 35): the last success of each per-cluster job and when the credentials expire.
HEALTH_FIELDS = (
    "reconciled_at",
    "inventory_imported_at",
    "usage_imported_at",
    "credential_expires_at",
)


class ServiceURLSerializerField(serializers.URLField):
    """DRF's URL field checking with :class:`~pools.common.validators.ServiceURLValidator`
    instead of Django's (a host of one label is taken, as on the page)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.validators = [
            *(v for v in self.validators if type(v) is not URLValidator),
            ServiceURLValidator(message=self.error_messages["invalid"]),
        ]


class ClusterSerializer(serializers.ModelSerializer):
    serializer_field_mapping = {
        **serializers.ModelSerializer.serializer_field_mapping,
        ServiceURLField: ServiceURLSerializerField,
    }
    pool_count = serializers.IntegerField(read_only=True)
    drift_count = serializers.IntegerField(
        read_only=True, help_text="Scheduler drifts found in the cluster that are not repaired."
    )
    errors_last_hour = serializers.IntegerField(
        read_only=True, help_text="Failed checks, reconciles and imports in the last hour."
    )
    last_error = serializers.CharField(
        read_only=True, allow_null=True, help_text="The newest error (kept 7 days), or null."
    )
    check_pending = serializers.BooleanField(
        read_only=True,
        help_text="A check was asked for (create, a connection change, check/) and has not "
        "recorded its result yet: status and checked_at are still the last check's. GET "
        "status_url until it is false.",
    )
    status_url = serializers.SerializerMethodField(
        help_text="Where the cluster, and so a pending check's result, is read."
    )
    credential_kind = serializers.ChoiceField(
        choices=CredentialKind.choices,
        help_text="How credentials are referred to. 'environment' is read only: the clusters "
        "the environment variables define say so, and no other can be given it.",
    )

    class Meta:
        model = Cluster
        fields = [
            *EDITABLE_FIELDS,
            *STATUS_FIELDS,
            "class_qos_problem",
            *HEALTH_FIELDS,
            "pool_count",
            "drift_count",
            "errors_last_hour",
            "last_error",
            "check_pending",
            "status_url",
        ]
        read_only_fields = (*STATUS_FIELDS, *HEALTH_FIELDS, "class_qos_problem")
        # The conditional unique constraints are the service's to refuse (409 naming the other).
        validators = []

    def get_status_url(self, cluster) -> str:
        return f"/api/v1/clusters/{cluster.slug}/"

    def validate_api_version(self, value: str) -> str:
        if value != getattr(self.instance, "api_version", ""):  # a stored pin: the check's mark
            pinned_api_version_validator(value)
        return value

    def validate_credential_kind(self, value: str) -> str:
        current = getattr(self.instance, "credential_kind", None)
        if value == CredentialKind.ENVIRONMENT and current != CredentialKind.ENVIRONMENT:
            raise serializers.ValidationError(
                "Only the clusters the environment variables define use 'environment'; give "
                "jwt-key, token-file or kubeconfig and the file's path."
            )
        return value


class ClusterMemberSerializer(serializers.ModelSerializer):
    """A cluster as a user who is not a pool admin reads it
    (:func:`pools.tenancy.permissions.may_see_cluster_details`): no connection, credential
    path, check reason or health figures, which name hosts and files."""

    status = serializers.ChoiceField(
        source="summary_status",
        choices=SUMMARY_STATUSES,
        read_only=True,
        help_text="'degraded': the last connection check found the cluster unreachable (its "
        "pools are read-only) or a per-cluster job failed in the last hour; else 'ok'.",
    )

    class Meta:
        model = Cluster
        fields = ["slug", "name", "kind", "site", "provider", "status"]
        read_only_fields = fields


def cluster_render(cluster: Cluster) -> dict:
    """A cluster as the API answers it (its audit events' ``before`` / ``after``), with its
    health figures read again (:func:`pools.clusters.selectors.cluster_list`)."""
    return dict(ClusterSerializer(selectors.cluster_list().get(pk=cluster.pk)).data)
