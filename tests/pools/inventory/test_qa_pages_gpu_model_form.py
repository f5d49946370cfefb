"""QA (h-qa): the catalogue page with an alias longer than the column holds.

``GpuModelAlias.value`` is ``varchar(120)``. The API's serializer refuses a 121+ character alias
as a field error ("Ensure this field has no more than 120 characters."), but the page's
``aliases_text`` parser cuts it to its first 120 characters without a word
(``GpuModelForm.clean_aliases_text``: ``value.strip()[:120]``) and saves the model (302): the
admin's alias is not the one stored, and the stored one matches a name no source reports.
Expected on the page, as on the API: a field error on Aliases, status 200, nothing saved.
"""

from __future__ import annotations

import pytest

from pools.inventory.models import GpuModel

pytestmark = pytest.mark.django_db

FORM = {
    "slug": "rtx_a6000",
    "name": "RTX A6000",
    "vendor_name": "NVIDIA RTX A6000",
    "architecture": "Ampere",
    "card_class": "datacentre",
    "form_factor": "pcie",
    "memory_gib": "48",
    "aliases_text": "admin: " + "x" * 200,
}


def test_an_alias_longer_than_120_characters_is_a_field_error(client, pool_admin):
    client.raise_request_exception = False
    client.force_login(pool_admin)

    response = client.post("/gpu-models/new/", FORM)

    assert response.status_code == 200
    assert "120" in response.content.decode()
    assert not GpuModel.objects.filter(slug="rtx_a6000").exists()
