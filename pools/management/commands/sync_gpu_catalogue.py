"""``manage.py sync_gpu_catalogue``: apply the shipped catalogue's new models and aliases.

A model an admin created or edited through the catalogue service (the page or the API: an
audit event ``gpu_model.created`` / ``gpu_model.updated`` names it) keeps the admin's values:
the file only fills in what the admin never touched (new models, missing aliases)."""

from django.core.management.base import BaseCommand

from pools.audit.models import AuditEvent
from pools.inventory.catalogue.sync import ADMIN_EDIT_ACTIONS, catalogue_sync
from pools.inventory.models import GpuModel, GpuModelAlias


def admin_kept_slugs() -> frozenset[str]:
    """Slugs of the GPU models an admin created or edited through the catalogue service (an
    audit event of :data:`ADMIN_EDIT_ACTIONS` about the row). One query."""
    edited = AuditEvent.objects.filter(
        action__in=ADMIN_EDIT_ACTIONS, object_type=GpuModel._meta.label_lower
    ).values_list("object_id", flat=True)
    ids = [int(pk) for pk in set(edited) if pk.isdigit()]
    return frozenset(GpuModel.objects.filter(pk__in=ids).values_list("slug", flat=True))


class Command(BaseCommand):
    help = (
        "Create or update GPU models and aliases from pools/inventory/catalogue/gpu_models.json; "
        "models an admin created or edited keep the admin's values."
    )

    def handle(self, *args, **options):
        kept = admin_kept_slugs()
        models, aliases = catalogue_sync(GpuModel, GpuModelAlias, kept=kept)
        self.stdout.write(f"{models} models created, {aliases} aliases created")
        if kept:
            self.stdout.write(
                f"{len(kept)} edited by an admin, left as they are: {', '.join(sorted(kept))}"
            )
