"""The Schedules page: the questions Hermes asks on its own (`watch.schedules`), made, changed,
paused and removed here; and each schedule's runs, with links to their sessions.

Every form is a plain POST with CSRF that redirects back (so a reload never posts twice); a form
with something wrong is drawn again with the message next to the field, and nothing is stored.
The list and a schedule's runs are also served alone (`schedules_list`, `schedule_runs_list`): an
open page fetches them again when the socket says a schedule or a run changed
(`controlroom.feeds.lists.SchedulesFeed`).
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseForbidden, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from controlroom.forms import ScheduleForm, schedule_initial
from controlroom.identity import operator_name, turn_actor
from controlroom.views.pages import around_page
from watch import selectors
from watch.models import Schedule
from watch.schedule_runs import schedule_run_start
from watch.schedules import ScheduleInvalid, schedule_create, schedule_update, schedules_changed_publish


def _listing() -> dict[str, Any]:
    return {"rows": selectors.schedules_listed(now=timezone.now())}


def _form_context(form: ScheduleForm) -> dict[str, Any]:
    return {"form": form, "models": settings.HERMES_MODELS, "model_default": settings.HERMES_MODEL}


def _changed(schedule_id: int | None) -> None:
    async_to_sync(schedules_changed_publish)(schedule_id)


def _schedule(schedule_id: int) -> Schedule:
    schedule = Schedule.objects.filter(pk=schedule_id).first()
    if schedule is None:
        raise Http404("no schedule with that id")
    return schedule


@require_http_methods(["GET", "POST"])
def schedules_page(request: HttpRequest) -> HttpResponse:
    """Every schedule, and the form that makes a new one."""
    form = ScheduleForm(request.POST) if request.method == "POST" else ScheduleForm()
    if request.method == "POST":
        operator = operator_name(request)
        if operator is None:
            return HttpResponseForbidden("Making a schedule needs an operator identity.")
        if form.is_valid():
            try:
                schedule = schedule_create(form.spec(), owner=operator)
            except ScheduleInvalid as exc:
                form.add_error(None, str(exc))
            else:
                _changed(schedule.pk)
                return HttpResponseRedirect(reverse("controlroom:schedules"))
    context = {**around_page(request, follow_schedules="list"), **_listing(), **_form_context(form)}
    return render(request, "controlroom/schedules.html", context)


@require_GET
def schedules_list(request: HttpRequest) -> HttpResponse:
    """The list alone (for live refreshes)."""
    if operator_name(request) is None:
        return HttpResponse(status=403)
    return render(request, "controlroom/partials/schedule_list.html", _listing())


@require_http_methods(["GET", "POST"])
def schedule_page(request: HttpRequest, schedule_id: int) -> HttpResponse:
    """One schedule: its form, to change it, and its runs."""
    schedule = _schedule(schedule_id)
    form = ScheduleForm(request.POST) if request.method == "POST" else ScheduleForm(initial=schedule_initial(schedule))
    if request.method == "POST":
        if operator_name(request) is None:
            return HttpResponseForbidden("Changing a schedule needs an operator identity.")
        if form.is_valid():
            try:
                schedule_update(schedule.pk, form.spec())
            except ScheduleInvalid as exc:
                form.add_error(None, str(exc))
            else:
                _changed(schedule.pk)
                return HttpResponseRedirect(reverse("controlroom:schedule", kwargs={"schedule_id": schedule.pk}))
    context = {
        **around_page(request, follow_schedules=str(schedule.pk)),
        **_form_context(form),
        "schedule": schedule,
        "runs": selectors.schedule_runs(schedule_id=schedule.pk),
    }
    return render(request, "controlroom/schedule.html", context)


@require_GET
def schedule_runs_list(request: HttpRequest, schedule_id: int) -> HttpResponse:
    """A schedule's runs alone (for live refreshes)."""
    if operator_name(request) is None:
        return HttpResponse(status=403)
    schedule = _schedule(schedule_id)
    context = {"schedule": schedule, "runs": selectors.schedule_runs(schedule_id=schedule.pk)}
    return render(request, "controlroom/partials/schedule_runs.html", context)


@require_POST
def schedule_enable(request: HttpRequest, schedule_id: int) -> HttpResponse:
    """Pause (`enabled=0`) or resume (`enabled=1`) a schedule; the rest of it is kept as it is."""
    if operator_name(request) is None:
        return HttpResponseForbidden("Pausing a schedule needs an operator identity.")
    schedule = _schedule(schedule_id)
    form = ScheduleForm({**schedule_initial(schedule), "enabled": request.POST.get("enabled") == "1"})
    if form.is_valid():
        try:
            schedule_update(schedule.pk, form.spec())
        except ScheduleInvalid:
            pass  # stored before the rules changed: the edit form says what to fix
        else:
            _changed(schedule.pk)
    return HttpResponseRedirect(reverse("controlroom:schedules"))


@require_POST
async def schedule_run(request: HttpRequest, schedule_id: int) -> HttpResponse:
    """Run the schedule once now (a paused one too) and open its session to watch it answer; a run
    the budget refused is recorded skipped, and the schedule's page shows why."""
    operator = operator_name(request)
    if operator is None:
        return HttpResponseForbidden("Running a schedule needs an operator identity.")
    try:
        run = await schedule_run_start(schedule_id, by=turn_actor(operator))
    except Schedule.DoesNotExist:
        raise Http404("No schedule has this number.") from None
    if run.session_id is not None:
        return HttpResponseRedirect(reverse("controlroom:session", kwargs={"session_id": run.session_id}))
    return HttpResponseRedirect(reverse("controlroom:schedule", kwargs={"schedule_id": schedule_id}))


@require_POST
def schedule_delete(request: HttpRequest, schedule_id: int) -> HttpResponse:
    """Remove a schedule and its runs (their sessions stay, like any session)."""
    if operator_name(request) is None:
        return HttpResponseForbidden("Removing a schedule needs an operator identity.")
    deleted, _ = Schedule.objects.filter(pk=schedule_id).delete()
    if deleted:
        _changed(schedule_id)
    return HttpResponseRedirect(reverse("controlroom:schedules"))
