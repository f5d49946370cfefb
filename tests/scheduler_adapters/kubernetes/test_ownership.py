"""Reading managedFields (scheduler_adapters/kubernetes_ownership.py), on entries shaped as a
real API server writes them (FieldsV1: ``.`` for the map itself, ``k:{...}`` for an element of
an associative list)."""

from scheduler_adapters.kubernetes_ownership import (
    fields_v1_paths,
    needs_upgrade,
    stale_paths,
    upgraded_managed_fields,
)

NAMESPACE_BY_OLD_PORTAL = {
    "apiVersion": "v1",
    "kind": "Namespace",
    "metadata": {
        "name": "team-nlp",
        "labels": {
            "app.kubernetes.io/managed-by": "gpu-pool-portal",
            "gpu-pool-portal/team": "nlp",
            "kubernetes.io/metadata.name": "team-nlp",
            "owner": "alice",
        },
        "annotations": {"scheduler.alpha.kubernetes.io/node-selector": "gpu-type=a100"},
        "managedFields": [
            {
                "manager": "gpu-pool-portal",
                "operation": "Update",
                "apiVersion": "v1",
                "time": "2026-11-30T10:00:00Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {
                    "f:metadata": {
                        "f:annotations": {
                            ".": {},
                            "f:scheduler.alpha.kubernetes.io/node-selector": {},
                        },
                        "f:labels": {
                            ".": {},
                            "f:app.kubernetes.io/managed-by": {},
                            "f:gpu-pool-portal/team": {},
                            "f:kubernetes.io/metadata.name": {},
                        },
                    }
                },
            },
            {
                "manager": "kubectl-label",
                "operation": "Update",
                "apiVersion": "v1",
                "time": "2026-12-01T09:00:00Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:labels": {"f:owner": {}}}},
            },
        ],
    },
}
WANTED = {
    "apiVersion": "v1",
    "kind": "Namespace",
    "metadata": {
        "name": "team-nlp",
        "labels": {
            "app.kubernetes.io/managed-by": "gpu-pool-portal",
            "gpu-pool-portal/team": "nlp",
        },
    },
}


def test_fields_v1_reads_leaves_and_steps_into_associative_list_elements():
    """A ``k:{...}`` element (associative list) is a step of the path, owned per field; a
    ``v:``/``i:`` element ends its path at the list."""
    fields = {
        "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
        "f:spec": {
            "f:template": {
                "f:spec": {"f:containers": {'k:{"name":"vllm"}': {".": {}, "f:image": {}}}}
            }
        },
    }

    fields["f:spec"]["f:template"]["f:spec"]["f:args"] = {"i:0": {}}

    assert fields_v1_paths(fields) == {
        ("metadata", "labels", "app"),
        ("spec", "template", "spec", "containers", 'k:{"name":"vllm"}', "image"),
        ("spec", "template", "spec", "args"),
    }


def test_what_the_portal_set_and_no_longer_wants_is_stale_but_not_the_servers_label():
    """The node-selector annotation is the portal's and unwanted; kubernetes.io/metadata.name
    is the server's (set on every write); owner is kubectl-label's."""
    assert stale_paths(NAMESPACE_BY_OLD_PORTAL, WANTED) == {
        ("metadata", "annotations", "scheduler.alpha.kubernetes.io/node-selector")
    }


def test_an_old_portals_update_entry_is_folded_into_its_apply_entry():
    assert needs_upgrade(NAMESPACE_BY_OLD_PORTAL) is True

    entries = upgraded_managed_fields(NAMESPACE_BY_OLD_PORTAL)

    assert [(e["manager"], e["operation"]) for e in entries] == [
        ("kubectl-label", "Update"),
        ("gpu-pool-portal", "Apply"),
    ]
    assert entries[1]["fieldsV1"] == {
        "f:metadata": {
            "f:annotations": {"f:scheduler.alpha.kubernetes.io/node-selector": {}},
            "f:labels": {"f:app.kubernetes.io/managed-by": {}, "f:gpu-pool-portal/team": {}},
        }
    }
    assert entries[1]["time"] == "2026-11-30T10:00:00Z"
    assert needs_upgrade({"metadata": {"managedFields": entries}}) is False
