"""The one rule of which cards the capacity invariant counts (issue 38), in its two spellings.

:data:`pools.inventory.models.SCHEDULABLE_CARD` (the ORM's) and ``WHOLE_CARD_SQL`` (the raw
statements' card-level half) must pick the same cards, and the two ways the pool's nodes are read
(:mod:`pools.capacity.node_kinds`: one SQL statement on PostgreSQL, the ORM on SQLite) must give
the same nodes. By hand, over every health × MIG mode on an up node:

=========  ========  =======
health     mig_mode  counts
=========  ========  =======
ok         False     yes
ok         None      yes (unknown MIG mode: as every card counted before MIG was read)
ok         True      no  (cut into MIG instances)
unknown    False     yes
unknown    None      yes
unknown    True      no
error      any       no
=========  ========  =======

plus: a card on a drained node and a card of no recognised model never count.
"""

from __future__ import annotations

import itertools

import pytest
from django.db import connection
from factories import GpuFactory, NodeFactory, PoolFactory

from pools.capacity import node_kinds
from pools.common.choices import GpuHealth, NodeState
from pools.inventory.models import WHOLE_CARD, WHOLE_CARD_SQL, Gpu, GpuModel

pytestmark = pytest.mark.django_db

# the table above, written out: (health, mig_mode) -> counted
COUNTS = {
    (GpuHealth.OK, False): True,
    (GpuHealth.OK, None): True,
    (GpuHealth.OK, True): False,
    (GpuHealth.UNKNOWN, False): True,
    (GpuHealth.UNKNOWN, None): True,
    (GpuHealth.UNKNOWN, True): False,
    (GpuHealth.ERROR, False): False,
    (GpuHealth.ERROR, None): False,
    (GpuHealth.ERROR, True): False,
}
assert set(COUNTS) == set(itertools.product(GpuHealth, (False, None, True)))


@pytest.fixture
def every_card():
    """One node, one card per (health, MIG mode), index in ``COUNTS`` order; a drained node's
    card and an unrecognised card beside them."""
    pool = PoolFactory(slug="rule")
    up = NodeFactory(hostname="up-1", pool=pool)
    for index, (health, mig) in enumerate(COUNTS):
        GpuFactory(node=up, index=index, health=health, mig_mode=mig)
    drained = NodeFactory(hostname="drain-1", pool=pool, state=NodeState.DRAIN)
    GpuFactory(node=drained, index=0, health=GpuHealth.OK, mig_mode=False)
    GpuFactory(node=up, index=20, gpu_model=None, raw_model_name="NVIDIA Mystery")
    return pool


def test_the_orm_rule_counts_what_the_table_says(every_card):
    expected = {index for index, counts in enumerate(COUNTS.values()) if counts}
    assert expected == {0, 1, 3, 4}  # ok/False, ok/None, unknown/False, unknown/None
    picked = Gpu.objects.schedulable().values_list("node__hostname", "index")
    assert set(picked) == {("up-1", index) for index in expected}


def test_the_sql_spelling_picks_the_same_cards_as_the_orm(every_card):
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT g.id FROM {Gpu._meta.db_table} g WHERE {WHOLE_CARD_SQL}")
        by_sql = {pk for (pk,) in cursor.fetchall()}
    assert by_sql == set(Gpu.objects.filter(WHOLE_CARD).values_list("pk", flat=True))
    # up-1 0, 1, 3, 4, the drained card and the unrecognised one (node and model are not card-level)
    assert len(by_sql) == 6


def test_the_pool_nodes_read_by_sql_and_by_the_orm_agree(every_card):
    """The node kinds' two readers on the same inventory: GPUs 0, 1, 3, 4 count, the board is
    every card of the model on the up node (0-8 and, of no model, not 20)."""
    model = GpuModel.objects.get(slug="a100_80g_sxm")
    by_orm = node_kinds._rows_orm(every_card, model)
    assert by_orm == [([0, 1, 3, 4], list(range(9)), None, "12.4", ["up-1"])]
    if connection.vendor == "postgresql":
        assert node_kinds._rows_sql(every_card, model) == by_orm
