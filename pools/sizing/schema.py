"""How the OpenAPI document describes the sizing inputs' own fields (:mod:`pools.sizing.inputs`):
nullable, default and required come from the fields as usual.

drf-spectacular finds these extensions by class once this module is imported (the API module
imports it); they live apart from the fields so that a process that only checks or computes
estimates - the ``estimate`` command, a worker - does not import drf-spectacular, whose plumbing
pulls in DRF's and Django's test clients (issue 34, "Speed"; ``python -X importtime``).
"""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiSerializerFieldExtension


class WholeNumberFieldSchema(OpenApiSerializerFieldExtension):
    target_class = "pools.sizing.inputs.WholeNumberField"

    def map_serializer_field(self, auto_schema, direction):
        field = self.target
        schema = {"type": "integer", "minimum": field.low}
        if field.high is not None:
            schema["maximum"] = field.high
        return schema


class BoundedNumberFieldSchema(OpenApiSerializerFieldExtension):
    target_class = "pools.sizing.inputs.BoundedNumberField"

    def map_serializer_field(self, auto_schema, direction):
        field = self.target
        return {
            "type": "number",
            "minimum": field.low,
            "exclusiveMinimum": field.low_open,
            "maximum": field.high,
            "exclusiveMaximum": field.high_open,
        }


class ParsedChoiceFieldSchema(OpenApiSerializerFieldExtension):
    target_class = "pools.sizing.inputs.ParsedChoiceField"

    def map_serializer_field(self, auto_schema, direction):
        return {"type": "string", "enum": list(self.target.allowed)}


class GpuModelSlugsFieldSchema(OpenApiSerializerFieldExtension):
    target_class = "pools.sizing.inputs.GpuModelSlugsField"

    def map_serializer_field(self, auto_schema, direction):
        return {"type": "array", "items": {"type": "string"}}


class CardHourPricesFieldSchema(OpenApiSerializerFieldExtension):
    target_class = "pools.sizing.inputs.CardHourPricesField"

    def map_serializer_field(self, auto_schema, direction):
        price = {"type": "string", "format": "decimal", "pattern": r"^\d+(\.\d+)?$"}
        return {"type": "object", "additionalProperties": price}
