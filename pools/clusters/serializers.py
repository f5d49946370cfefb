"""API shapes of clusters. Credentials appear only as the path the portal reads them from."""

from __future__ import annotations

from rest_framework import serializers

from pools.choices import CredentialKind
from pools.clusters.models import Cluster

STATUS_FIELDS = ("status", "status_reason", "api_version_served", "checked_at", "reachable_at")


class ClusterSerializer(serializers.ModelSerializer):
    pool_count = serializers.IntegerField(read_only=True)
    credential_kind = serializers.ChoiceField(
        choices=[c for c in CredentialKind.choices if c[0] != CredentialKind.ENVIRONMENT],
        help_text="How credentials are referred to (the environment's clusters say "
        "'environment' and are defined by the variables).",
    )

    class Meta:
        model = Cluster
        fields = [
            "slug",
            "name",
            "kind",
            "api_url",
            "slurm_cluster_name",
            "slurm_user",
            "credential_kind",
            "credential_path",
            "ca_path",
            "kube_context",
            "time_zone",
            "api_version",
            "kueue",
            "site",
            "provider",
            "retiring",
            *STATUS_FIELDS,
            "class_qos_problem",
            "pool_count",
        ]
        read_only_fields = (*STATUS_FIELDS, "class_qos_problem")
        # The conditional unique constraints are the service's to refuse (409 naming the other).
        validators = []

    def to_representation(self, instance):
        data = super().to_representation(instance)
        data["credential_kind"] = instance.credential_kind
        return data
