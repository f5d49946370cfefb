"""Plain statements for the approval's hot path: a row read into its model and a model inserted,
without a queryset. The ORM (and a raw queryset, which resolves its columns and converters on
every call) took longer to build them than PostgreSQL to run them (issues #16 and #29 item 7:
approvals within 2x a bare transaction of the same statements). Each value goes through its
field's converters (read) or preparation (write) as a queryset's would; model signals are not
sent (the models written here have no receivers).
"""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.db.models.expressions import Col


class RowReader:
    """Rows of ``model`` as model instances, read by a plain statement: ``columns`` (its columns
    in field order) come first in the SELECT, each value through its field's converters (JSON,
    …) as a queryset's would; built once per model."""

    def __init__(self, model: type) -> None:
        self.model = model
        self.fields = model._meta.concrete_fields
        self.names = [field.attname for field in self.fields]
        self.columns = ", ".join(connection.ops.quote_name(field.column) for field in self.fields)
        self.converters: list | None = None  # (index, column, converters), once connected

    def read(self, sql: str, params: list, extra: tuple[str, ...] = ()) -> list:
        """The rows ``sql`` (``SELECT {columns}, …``) answers, as models; the values of the
        columns after the model's are set as the attributes ``extra`` names."""
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            rows = cursor.fetchall()
        count = len(self.fields)
        return [self.model_of(row[:count], zip(extra, row[count:], strict=True)) for row in rows]

    def qualified(self, alias: str) -> str:
        """The model's columns, in field order, each as ``alias."column"`` (for a join)."""
        quote = connection.ops.quote_name
        return ", ".join(f"{alias}.{quote(field.column)}" for field in self.fields)

    def locked(self, pk: int) -> Any:
        """The row ``pk`` locked (``FOR UPDATE``; SQLite has no row locks: a write transaction
        locks the database, so there it is read) as a ``model``, or ``None``."""
        sql = f"SELECT {self.columns} FROM {self.model._meta.db_table} WHERE id = %s"
        if connection.features.has_select_for_update:
            sql += " FOR UPDATE"
        found = self.read(sql, [pk])
        return found[0] if found else None

    def model_of(self, row: tuple, extra=()) -> Any:
        """``row`` (the model's columns in field order) as a ``model``, each value through its
        field's converters; the ``(name, value)`` pairs of ``extra`` set as attributes."""
        if self.converters is None:
            found = enumerate(map(self._converters, self.fields))
            self.converters = [(i, *pair) for i, pair in found if pair[1]]
        values = list(row)
        for i, column, converters in self.converters:
            for convert in converters:
                values[i] = convert(values[i], column, connection)
        obj = self.model.from_db(connection.alias, self.names, values)
        for name, value in extra:
            setattr(obj, name, value)
        return obj

    def _converters(self, field: Any) -> tuple[Col, list]:
        column = Col(self.model._meta.db_table, field)
        converters = field.get_db_converters(connection)
        return column, converters + connection.ops.get_db_converters(column)


class RowWriter:
    """INSERTs of ``model`` rows, the statement built once: every column but the id, each value
    prepared by its field as ``save`` prepares it (``auto_now(_add)`` stamped)."""

    def __init__(self, model: type) -> None:
        self.fields = [field for field in model._meta.concrete_fields if not field.primary_key]
        columns = ", ".join(connection.ops.quote_name(field.column) for field in self.fields)
        values = ", ".join(["%s"] * len(self.fields))
        self.sql = f"INSERT INTO {model._meta.db_table} ({columns}) VALUES ({values}) RETURNING id"

    def insert(self, obj: Any) -> None:
        """Insert ``obj`` (unsaved) in the caller's transaction; sets its id and marks it
        saved, as ``save(force_insert=True)`` does."""
        params = [field.get_db_prep_save(field.pre_save(obj, True), connection)
                  for field in self.fields]  # fmt: skip
        with connection.cursor() as cursor:
            cursor.execute(self.sql, params)
            obj.pk = cursor.fetchone()[0]
        obj._state.adding, obj._state.db = False, connection.alias
