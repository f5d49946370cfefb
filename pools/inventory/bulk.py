"""Fast bulk UPDATE of many rows by primary key, one parameterised statement per row.

Django's ``bulk_update`` builds one ``CASE`` expression per column whose size grows with the
batch, which costs seconds of Python for thousands of rows. Here the statement is a plain
``UPDATE ... WHERE id = %s`` sent with ``executemany`` (pipelined by psycopg 3), which works on
PostgreSQL and SQLite alike.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connections, models, router


def bulk_update_rows(objs: Sequence[models.Model], fields: Sequence[str]) -> int:
    """Write ``fields`` of every object in ``objs`` (all of one model); return rows sent.

    Field values go through each field's ``get_db_prep_save``, so JSON, decimals and foreign
    keys (given by field name, e.g. ``"pool"``) are stored exactly as ``save()`` would.
    """
    if not objs:
        return 0
    model = type(objs[0])
    meta = model._meta
    connection = connections[router.db_for_write(model)]
    concrete = [meta.get_field(name) for name in fields]
    quote = connection.ops.quote_name
    assignments = ", ".join(f"{quote(f.column)} = %s" for f in concrete)
    sql = f"UPDATE {quote(meta.db_table)} SET {assignments} WHERE {quote(meta.pk.column)} = %s"
    params = [
        [f.get_db_prep_save(getattr(obj, f.attname), connection) for f in concrete] + [obj.pk]
        for obj in objs
    ]
    with connection.cursor() as cursor:
        cursor.executemany(sql, params)
    return len(params)
