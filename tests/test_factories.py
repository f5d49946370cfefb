"""Every model of the project has a factory in tests/factories.py, and each saves a valid row."""

from __future__ import annotations

import factories
import factory
import pytest
from django.apps import apps

pytestmark = pytest.mark.django_db

FACTORIES = {
    f._meta.model: f
    for f in vars(factories).values()
    if isinstance(f, type) and issubclass(f, factory.django.DjangoModelFactory) and f._meta.model
}


def test_every_model_has_a_factory():
    models = [m for app in ("pools", "billing") for m in apps.get_app_config(app).get_models()]
    assert sorted(m.__name__ for m in models if m not in FACTORIES) == []


@pytest.mark.parametrize(
    "model", sorted(FACTORIES, key=lambda m: m.__name__), ids=lambda m: m.__name__
)
def test_each_factory_saves_a_valid_row(model):
    obj = FACTORIES[model]()
    obj.full_clean(validate_unique=False) if model.__name__ not in {"User"} else None
    assert model.objects.filter(pk=obj.pk).exists()
