"""Elicitation: an MCP server asking, in the middle of a tool call, for input from a person.

The server sends `elicitation/create` with a message and a *restricted* JSON schema (a flat object
of string, number, integer, boolean and enum properties, and arrays of enum values for a choice of
several — `multi_enum` here —, with titles, descriptions, defaults and `required`). Hermes answers
`accept` with content that matches the schema, `decline`, or `cancel`.

This module holds the value types every part shares and the schema rules, with no I/O: the
connection routes a request to the call that caused it (`agent.tools.connection`), the hub turns
it into an `ElicitationAsk` for the turn (`agent.tools.hub`), the engine records it and asks the
turn's frontend (`agent.elicitation.turn`), and each frontend answers in its own way — the
control room with a form, `ask` on the terminal, peers and investigations never (they decline:
nobody is there to ask).

Server-provided text (message, titles, descriptions, enum labels) is untrusted: shown escaped,
never as HTML, never in an id.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

Action = Literal["accept", "decline", "cancel"]
ACTIONS: tuple[Action, ...] = ("accept", "decline", "cancel")

FieldKind = Literal["string", "number", "integer", "boolean", "enum", "multi_enum"]

# `format`s of string properties the restricted schema allows; a value is checked only loosely
# (the server validates what it receives), enough to catch a typo in a form.
STRING_FORMATS = frozenset({"email", "uri", "date", "date-time"})

# Bounds that keep a hostile or broken server from drawing an unusable form.
MAX_FIELDS = 50
MAX_OPTIONS = 200


class ElicitSchemaError(ValueError):
    """The requested schema is not the restricted elicitation schema; Hermes cannot show it."""


class ElicitContentError(ValueError):
    """Content that does not match the requested schema; `errors` maps each field to its problem."""

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(f"{name}: {problem}" for name, problem in errors.items()))
        self.errors = errors


@dataclass(frozen=True)
class ElicitOption:
    value: str
    label: str


@dataclass(frozen=True)
class ElicitField:
    """One property of the requested schema, as a form or a prompt shows it."""

    name: str
    kind: FieldKind
    title: str
    description: str = ""
    required: bool = False
    default: Any = None
    options: tuple[ElicitOption, ...] = ()
    string_format: str = ""
    min_length: int | None = None
    max_length: int | None = None
    minimum: float | None = None
    maximum: float | None = None
    # How many choices a `multi_enum` takes.
    min_items: int | None = None
    max_items: int | None = None

    @property
    def label(self) -> str:
        return self.title or self.name

    def to_dict(self) -> dict[str, Any]:
        """JSON-able, for events and the database."""
        return {
            "name": self.name,
            "kind": self.kind,
            "title": self.title,
            "description": self.description,
            "required": self.required,
            "default": self.default,
            "options": [{"value": option.value, "label": option.label} for option in self.options],
            "format": self.string_format,
            "min_length": self.min_length,
            "max_length": self.max_length,
            "minimum": self.minimum,
            "maximum": self.maximum,
            "min_items": self.min_items,
            "max_items": self.max_items,
        }


@dataclass(frozen=True)
class ElicitationAsk:
    """One elicitation as the turn sees it: which server asked, during which call, for what."""

    server: str
    tool: str
    message: str
    requested_schema: dict[str, Any]
    fields: tuple[ElicitField, ...]
    # When the call this belongs to times out (monotonic clock); waiting past it is pointless.
    deadline: float | None = None
    tool_use_id: str = ""
    # Why Hermes cannot show this request (a schema outside the restricted subset): it is declined.
    schema_error: str = ""
    # `form` (a server's question) or `confirmation` (Hermes's own, before running an execution).
    purpose: str = "form"


@dataclass(frozen=True)
class ElicitationAnswer:
    action: Action
    content: dict[str, Any] | None = None
    # Why, in a sentence, when nobody chose it (no operator, a timeout, a form Hermes cannot show).
    reason: str = ""
    # Who answered: the operator's identity, or `hermes` when Hermes answered by itself.
    answered_by: str = "hermes"


@dataclass(frozen=True)
class ElicitationRecord:
    """An elicitation stored for the turn (`agent.models.Elicitation`), handed to a frontend to answer."""

    id: str
    ask: ElicitationAsk
    # Seconds the frontend has before Hermes cancels the request.
    timeout: float
    # ISO 8601, for people: when Hermes cancels it.
    expires_at: str = ""


# How a frontend answers the elicitations of its turns; a turn without one declines them all.
Answerer = Callable[[ElicitationRecord], Awaitable[ElicitationAnswer]]
# What the hub calls for one tool call's elicitation (bound to the turn by the engine).
Elicitor = Callable[[ElicitationAsk], Awaitable[ElicitationAnswer]]


def elicit_fields_parse(schema: Any) -> tuple[ElicitField, ...]:
    """The fields of a restricted elicitation schema, in the server's order.

    Raises `ElicitSchemaError` for anything else (nested objects, arrays of anything but enum
    values, unknown types): a form Hermes cannot draw faithfully is declined rather than guessed at.
    """
    if not isinstance(schema, Mapping) or schema.get("type", "object") != "object":
        raise ElicitSchemaError("the requested schema is not an object")
    properties = schema.get("properties") or {}
    if not isinstance(properties, Mapping):
        raise ElicitSchemaError("the requested schema's properties are not an object")
    if len(properties) > MAX_FIELDS:
        raise ElicitSchemaError(f"the requested schema has more than {MAX_FIELDS} properties")
    required = schema.get("required") or []
    if not isinstance(required, list) or not all(isinstance(name, str) for name in required):
        raise ElicitSchemaError("the requested schema's `required` is not a list of names")
    return tuple(_field(str(name), spec, required=name in required) for name, spec in properties.items())


def _field(name: str, spec: Any, *, required: bool) -> ElicitField:
    if not isinstance(spec, Mapping):
        raise ElicitSchemaError(f"property {name!r} is not a schema")
    kind = spec.get("type")
    common: dict[str, Any] = {
        "name": name,
        "title": _text(spec.get("title")),
        "description": _text(spec.get("description")),
        "required": required,
    }
    if kind == "array":
        return _multi_enum_field(name, spec, common)
    options = _options(name, spec)
    if options:
        if kind not in (None, "string"):
            raise ElicitSchemaError(f"property {name!r}: only string enums are supported")
        default = spec.get("default")
        if default is not None and default not in {option.value for option in options}:
            default = None
        return ElicitField(kind="enum", options=options, default=default, **common)
    if kind == "string":
        string_format = _text(spec.get("format"))
        if string_format and string_format not in STRING_FORMATS:
            string_format = ""
        default = spec.get("default")
        return ElicitField(
            kind="string",
            default=default if isinstance(default, str) else None,
            string_format=string_format,
            min_length=_int_or_none(spec.get("minLength")),
            max_length=_int_or_none(spec.get("maxLength")),
            **common,
        )
    if kind in ("number", "integer"):
        number = _number_or_none(spec.get("default"))
        if number is not None and kind == "integer":
            number = int(number) if number.is_integer() else None
        elif number is not None and spec.get("default") == int(number):
            number = spec["default"]  # 30 stays 30, not 30.0
        return ElicitField(
            kind=kind,
            default=number,
            minimum=_number_or_none(spec.get("minimum")),
            maximum=_number_or_none(spec.get("maximum")),
            **common,
        )
    if kind == "boolean":
        default = spec.get("default")
        return ElicitField(kind="boolean", default=default if isinstance(default, bool) else None, **common)
    raise ElicitSchemaError(f"property {name!r} has type {kind!r}, which an elicitation form cannot ask for")


def _multi_enum_field(name: str, spec: Mapping[str, Any], common: dict[str, Any]) -> ElicitField:
    """An array whose items are enum values: `items` with `enum`, or titled `anyOf` consts."""
    items = spec.get("items")
    options = _options(name, items) if isinstance(items, Mapping) and items.get("type", "string") == "string" else ()
    if not options:
        raise ElicitSchemaError(f"property {name!r}: an array can only ask for a choice of string enum values")
    values = {option.value for option in options}
    default = spec.get("default")
    if not (isinstance(default, list) and all(isinstance(item, str) and item in values for item in default)):
        default = None
    return ElicitField(
        kind="multi_enum",
        options=options,
        default=default,
        min_items=_int_or_none(spec.get("minItems")),
        max_items=_int_or_none(spec.get("maxItems")),
        **common,
    )


def _options(name: str, spec: Mapping[str, Any]) -> tuple[ElicitOption, ...]:
    """An enum's choices: `enum` (+ the legacy `enumNames` labels) or titled `oneOf` consts (`anyOf`
    in a multi-select's items)."""
    if "enum" in spec:
        values = spec["enum"]
        labels = spec.get("enumNames")
        if not isinstance(values, list) or not values or not all(isinstance(value, str) for value in values):
            raise ElicitSchemaError(f"property {name!r}: `enum` must be a list of strings")
        if not (isinstance(labels, list) and len(labels) == len(values)):
            labels = values
        options = tuple(
            ElicitOption(value=value, label=_text(label) or value) for value, label in zip(values, labels, strict=True)
        )
    elif isinstance(spec.get("oneOf"), list) or isinstance(spec.get("anyOf"), list):
        key = "oneOf" if isinstance(spec.get("oneOf"), list) else "anyOf"
        choices = [
            choice for choice in spec[key] if isinstance(choice, Mapping) and isinstance(choice.get("const"), str)
        ]
        if not choices:
            raise ElicitSchemaError(f"property {name!r}: `{key}` holds no string constants")
        options = tuple(
            ElicitOption(value=choice["const"], label=_text(choice.get("title")) or choice["const"])
            for choice in choices
        )
    else:
        return ()
    if len(options) > MAX_OPTIONS:
        raise ElicitSchemaError(f"property {name!r} has more than {MAX_OPTIONS} choices")
    return options


def elicit_content_validate(
    fields: tuple[ElicitField, ...] | list[ElicitField], values: Mapping[str, Any], *, from_form: bool = False
) -> dict[str, Any]:
    """The content to send with `accept`: `values` checked against the fields, defaults applied.

    A field left out (or, `from_form`, left empty) takes the schema's default when it has one
    (SEP-1034); a required field with neither is an error. With `from_form`, values are text as a
    form or a terminal sends them ("3", "on") and are converted. Unknown names are errors, so a
    typo never silently drops an answer. Raises `ElicitContentError` listing every problem.
    """
    known = {field.name for field in fields}
    errors = {name: "not a field of this form" for name in values if name not in known}
    content: dict[str, Any] = {}
    for field in fields:
        raw = values.get(field.name)
        if from_form and field.kind == "boolean":
            # An unticked checkbox sends nothing: that is `false`, not "left out".
            raw = _form_bool(raw)
        elif from_form and field.kind == "multi_enum":
            raw = _form_choices(field, raw)
        elif from_form and isinstance(raw, str) and raw.strip() == "":
            raw = None
        if raw is None:
            if field.default is not None:
                content[field.name] = field.default
            elif field.required:
                errors[field.name] = "required"
            continue
        try:
            content[field.name] = _value(field, raw, from_form=from_form)
        except ValueError as problem:
            errors[field.name] = str(problem)
    if errors:
        raise ElicitContentError(errors)
    return content


def elicit_defaults(fields: tuple[ElicitField, ...] | list[ElicitField]) -> dict[str, Any]:
    """Every field's default (fields without one are left out)."""
    return {field.name: field.default for field in fields if field.default is not None}


def _value(field: ElicitField, raw: Any, *, from_form: bool) -> Any:
    if field.kind == "boolean":
        if isinstance(raw, bool):
            return raw
        raise ValueError("must be true or false")
    if field.kind in ("number", "integer"):
        number = _number(raw, from_form=from_form)
        if field.kind == "integer":
            if not float(number).is_integer():
                raise ValueError("must be a whole number")
            number = int(number)
        if field.minimum is not None and number < field.minimum:
            raise ValueError(f"must be at least {field.minimum:g}")
        if field.maximum is not None and number > field.maximum:
            raise ValueError(f"must be at most {field.maximum:g}")
        return number
    if field.kind == "multi_enum":
        return _choices(field, raw)
    if not isinstance(raw, str):
        raise ValueError("must be text")
    if field.kind == "enum":
        if raw not in {option.value for option in field.options}:
            raise ValueError("is not one of the choices")
        return raw
    if field.min_length is not None and len(raw) < field.min_length:
        raise ValueError(f"must be at least {field.min_length} characters")
    if field.max_length is not None and len(raw) > field.max_length:
        raise ValueError(f"must be at most {field.max_length} characters")
    if field.string_format == "email" and ("@" not in raw or raw.startswith("@") or raw.endswith("@")):
        raise ValueError("must be an email address")
    if field.string_format == "uri" and ":" not in raw:
        raise ValueError("must be a URI")
    return raw


def _number(raw: Any, *, from_form: bool) -> int | float:
    if isinstance(raw, bool):
        raise ValueError("must be a number")
    if isinstance(raw, int | float) and math.isfinite(raw):
        return raw
    if from_form and isinstance(raw, str):
        text = raw.strip()
        try:
            return int(text)
        except ValueError:
            pass
        try:
            value = float(text)
        except ValueError:
            raise ValueError("must be a number") from None
        if math.isfinite(value):
            return value
    raise ValueError("must be a number")


def _choices(field: ElicitField, raw: Any) -> list[str]:
    if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
        raise ValueError("must be a list of choices")
    if any(item not in {option.value for option in field.options} for item in raw):
        raise ValueError("holds something that is not one of the choices")
    if len(set(raw)) != len(raw):
        raise ValueError("holds a choice twice")
    if field.min_items is not None and len(raw) < field.min_items:
        raise ValueError(f"needs at least {field.min_items} choice{'' if field.min_items == 1 else 's'}")
    if field.max_items is not None and len(raw) > field.max_items:
        raise ValueError(f"takes at most {field.max_items} choice{'' if field.max_items == 1 else 's'}")
    return raw


def _form_choices(field: ElicitField, raw: Any) -> Any:
    """A multi-select as a form sends it: the ticked values (a list, or one value alone; the
    control room's empty marker is dropped, so nothing ticked is `[]`), or as typed on a terminal,
    comma-separated. None (not sent at all) stays None, for the default or `required` to decide."""
    if isinstance(raw, list):
        return [item for item in raw if item != ""]
    if not isinstance(raw, str):
        return raw
    if raw in {option.value for option in field.options}:
        return [raw]
    return [item.strip() for item in raw.split(",") if item.strip()]


def _form_bool(raw: Any) -> bool | None:
    if raw is None or isinstance(raw, bool):
        return bool(raw)
    text = str(raw).strip().lower()
    if text in ("on", "true", "yes", "y", "1"):
        return True
    if text in ("", "off", "false", "no", "n", "0"):
        return False
    return None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _number_or_none(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None
