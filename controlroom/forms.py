"""Input of the control room's POSTs and filters: validated here, so views see only clean values."""

from __future__ import annotations

import datetime
from typing import Any

from django import forms
from django.conf import settings
from django.core.validators import RegexValidator

from agent.models import Activity
from agent.search.query import LIMIT_MAX, QUERY_MAX_CHARS, SearchFilters
from watch.models import Investigation, Schedule
from watch.schedules import NAME_MAX, QUESTION_MAX, ScheduleInvalid, ScheduleSpec, cron_check

PLACES = (("home", "home"), ("drawer", "drawer"))
# Oikos ids look like apr-0001 / exe-0001; anything else is refused before it reaches Oikos.
OIKOS_ID = RegexValidator(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,99}$", "Not an Oikos id.")


class AskForm(forms.Form):
    message = forms.CharField(strip=True, error_messages={"required": "Type a question for Hermes first."})
    session = forms.UUIDField(required=False)
    place = forms.ChoiceField(choices=PLACES, required=False)
    # Checked against HERMES_MODELS by the engine, which says which models are offered.
    model = forms.CharField(max_length=100, required=False, strip=True)

    def clean_message(self) -> str:
        message: str = self.cleaned_data["message"]
        limit = settings.HERMES_MAX_MESSAGE_CHARS
        if len(message) > limit:
            raise forms.ValidationError(f"The message has {len(message):,} characters; the limit is {limit:,}.")
        return message

    def clean_place(self) -> str:
        return self.cleaned_data.get("place") or "home"


class DecisionForm(forms.Form):
    approval_id = forms.CharField(max_length=100, validators=[OIKOS_ID])
    execution_id = forms.CharField(max_length=100, required=False, validators=[OIKOS_ID])
    decision = forms.ChoiceField(choices=(("approve", "approve"), ("deny", "deny")))
    reason = forms.CharField(max_length=500, required=False, strip=True)


class LedgerFilterForm(forms.Form):
    turn = forms.UUIDField(required=False)
    session = forms.UUIDField(required=False)
    server = forms.CharField(max_length=100, required=False)
    tool = forms.CharField(max_length=200, required=False)
    only_errors = forms.BooleanField(required=False)
    state = forms.ChoiceField(choices=[("", "any"), *Activity.State.choices], required=False)
    # Keyset cursors (`selectors.ledger_page`): the page after / before the row with this id.
    older = forms.IntegerField(min_value=1, required=False)
    newer = forms.IntegerField(min_value=1, required=False)


class InvestigationFilterForm(forms.Form):
    entity = forms.CharField(max_length=200, required=False)
    state = forms.ChoiceField(choices=[("", "any"), *Investigation.State.choices], required=False)
    kind = forms.CharField(max_length=100, required=False)
    page = forms.IntegerField(min_value=1, required=False)


class SearchForm(forms.Form):
    q = forms.CharField(max_length=QUERY_MAX_CHARS, required=False, strip=True)
    since = forms.DateField(required=False)
    # Inclusive: hits up to the end of this day (UTC).
    until = forms.DateField(required=False)
    actor = forms.CharField(max_length=150, required=False, strip=True)
    origin = forms.CharField(max_length=20, required=False, strip=True)
    tool = forms.CharField(max_length=200, required=False, strip=True)

    def filters(self) -> SearchFilters:
        """The search this form asks for (call after `is_valid()`)."""
        data = self.cleaned_data
        since: datetime.date | None = data["since"]
        until: datetime.date | None = data["until"]
        return SearchFilters(
            query=data["q"],
            since=datetime.datetime.combine(since, datetime.time(), tzinfo=datetime.UTC) if since else None,
            until=(
                datetime.datetime.combine(until, datetime.time(), tzinfo=datetime.UTC) + datetime.timedelta(days=1)
                if until
                else None
            ),
            actor=data["actor"],
            origin=data["origin"],
            tool=data["tool"],
            limit=LIMIT_MAX,
        )


class ScheduleForm(forms.Form):
    """A schedule as typed on the Schedules page; `watch.schedules.spec_check` has the last word."""

    name = forms.CharField(max_length=NAME_MAX, strip=True)
    kind = forms.ChoiceField(choices=Schedule.Kind.choices, initial=Schedule.Kind.QUESTION)
    question = forms.CharField(max_length=QUESTION_MAX, required=False, strip=True, widget=forms.Textarea)
    cron = forms.CharField(max_length=100, strip=True, initial="0 7 * * *")
    timezone = forms.CharField(max_length=64, strip=True, initial="UTC")
    matrix_room = forms.CharField(max_length=255, required=False, strip=True)
    model = forms.CharField(max_length=100, required=False, strip=True)
    may_propose = forms.BooleanField(required=False)
    enabled = forms.BooleanField(required=False, initial=True)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if "cron" in data and "timezone" in data:
            # Said next to the field it is about; nothing is stored (the view stores only a valid form).
            try:
                data["cron"] = cron_check(data["cron"], data["timezone"])
            except ScheduleInvalid as exc:
                self.add_error("timezone" if str(exc).startswith("Unknown time zone") else "cron", str(exc))
        return data

    def spec(self) -> ScheduleSpec:
        """What the form asks for (call after `is_valid()`)."""
        data = self.cleaned_data
        return ScheduleSpec(
            name=data["name"],
            cron=data["cron"],
            timezone=data["timezone"],
            question=data["question"],
            kind=data["kind"],
            matrix_room=data["matrix_room"],
            model=data["model"],
            may_propose=data["may_propose"],
            enabled=data["enabled"],
        )


def schedule_initial(schedule: Schedule) -> dict[str, Any]:
    """The edit form's values: the schedule as stored."""
    return {
        field: getattr(schedule, field)
        for field in ("name", "kind", "question", "cron", "timezone", "matrix_room", "model", "may_propose", "enabled")
    }
