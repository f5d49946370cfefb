"""``manage.py sync_gpu_catalogue``: apply the shipped catalogue's new models and aliases."""

from django.core.management.base import BaseCommand

from pools.inventory.catalogue.sync import catalogue_sync
from pools.inventory.models import GpuModel, GpuModelAlias


class Command(BaseCommand):
    help = "Create or update GPU models and aliases from pools/inventory/catalogue/gpu_models.json."

    def handle(self, *args, **options):
        models, aliases = catalogue_sync(GpuModel, GpuModelAlias)
        self.stdout.write(f"{models} models created, {aliases} aliases created")
