"""The utilisation fleet (:mod:`utilisation_support`) for the utilisation tests (a module that
defines its own ``fleet`` uses its own), and a staff user's client for the pages."""

import pytest
from django.test import Client
from utilisation_support import fleet  # noqa: F401


@pytest.fixture
def admin(django_user_model) -> Client:
    """A client signed in as a staff user (``boss``)."""
    client = Client()
    client.force_login(django_user_model.objects.create_user("boss", password="pw", is_staff=True))
    return client
