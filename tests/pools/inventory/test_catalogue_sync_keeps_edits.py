"""Issue 38 leftover: ``sync_gpu_catalogue`` never overwrites what an admin set.

Rule: a GPU model that an admin created or edited through the catalogue service (audit event
``gpu_model.created`` / ``gpu_model.updated`` about it) keeps its values; every other model is
brought back to the shipped file; missing aliases are added to both.
"""

from __future__ import annotations

import pytest
from django.core.management import call_command

from pools.inventory.models import GpuModel, GpuModelAlias
from pools.inventory.services.catalogue import gpu_model_update

pytestmark = pytest.mark.django_db


def test_an_admin_edit_survives_the_sync_and_other_rows_follow_the_file(pool_admin, capsys):
    l40s = GpuModel.objects.get(slug="l40s")
    shipped_l40s_tdp = l40s.tdp_w
    gpu_model_update(gpu_model=l40s, changes={"tdp_w": 333}, aliases=None, actor=pool_admin)
    h100 = GpuModel.objects.get(slug="h100_sxm")
    shipped_h100_tdp = h100.tdp_w
    GpuModel.objects.filter(pk=h100.pk).update(tdp_w=1)  # drifted without the service
    alias = GpuModelAlias.objects.filter(gpu_model=l40s).first()
    alias.delete()  # a shipped alias gone

    call_command("sync_gpu_catalogue")

    assert shipped_l40s_tdp != 333
    assert GpuModel.objects.get(slug="l40s").tdp_w == 333
    assert GpuModel.objects.get(slug="h100_sxm").tdp_w == shipped_h100_tdp
    assert GpuModelAlias.objects.filter(gpu_model=l40s, key=alias.key).exists()
    out = capsys.readouterr().out
    assert "0 models created, 1 aliases created" in out
    assert "1 edited by an admin, left as they are: l40s" in out
