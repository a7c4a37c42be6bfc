"""Word pools and small helpers shared by the facets of every service."""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from typing import Any

from compoworld.tasks.authoring import AuthorContext, AuthoringError
from compoworld.tasks.facets import Found, Value
from compoworld.tasks.rubric import all_of, record_is, where
from envs._world import Person, world

CODENAMES = (
  "Falcon", "Juniper", "Atlas", "Cobalt", "Nimbus", "Orchid", "Granite", "Harbor", "Lumen",
  "Saffron", "Tundra", "Vertex", "Willow", "Zephyr", "Beacon", "Cinder", "Delta", "Ember",
)  # fmt: skip
SUBJECTS = (
  "budget review", "vendor onboarding", "launch readiness", "quarterly planning", "site visit",
  "security audit", "pricing workshop", "hiring sync", "customer kickoff", "data migration",
  "renewal prep", "offsite planning",
)  # fmt: skip


def topic(ctx: AuthorContext) -> str:
  """A distinctive project topic such as "Juniper launch readiness", unique within the task."""
  used = ctx.scratch.setdefault("topics", set())
  for _ in range(50):
    name = f"{ctx.choice(CODENAMES)} {ctx.choice(SUBJECTS)}"
    if name.split()[0] not in {u.split()[0] for u in used}:
      used.add(name)
      return name
  raise AuthoringError("topics_exhausted")


def fresh_number(
  ctx: AuthorContext, template: str, span: tuple[int, int], used: set, reason: str, tries: int = 50
) -> str:
  """``template`` with a random number from ``span`` in it ("SO-{}"), one no record in ``used``
  carries yet; refused as ``reason`` when ``tries`` draws find none."""
  for _ in range(tries):
    number = template.format(ctx.rng.randint(*span))
    if number not in used:
      return number
  raise AuthoringError(reason)


def iso(dt: datetime) -> str:
  """A time as records hold it: ISO 8601, to the second."""
  return dt.replace(microsecond=0).isoformat()


def future_slot(ctx: AuthorContext, service: str, days: tuple[int, int] = (2, 9)) -> datetime:
  """A working-hours start time a few days after the service's logical now."""
  now = ctx.state(service).now
  day = now.replace(hour=0, minute=0, second=0) + timedelta(days=ctx.rng.randint(*days))
  return day + timedelta(hours=ctx.rng.choice((9, 10, 11, 13, 14, 15, 16)))


def since(ctx: AuthorContext, service: str, field: str) -> dict[str, Any]:
  """A rubric condition: the record was made after s0 (so it is the agent's doing)."""
  return {"field": field, "cmp": "ge", "value": ctx.since(service)}


# --- what a read hands on ---------------------------------------------------------------------


def found_one(kind: str, noun: str, value: Any, **fields: Any) -> Found:
  """A read that hands on the one ``value``, which names itself (an address, a link, a name)."""
  return Found(kind, noun, [Value(value, value)], **fields)


def found_people(
  noun: str, emails: Any, excluded: Any = (), exclusion: str = "", **fields: Any
) -> Found:
  """A read that hands on several people by address, and those a write must leave out
  (``excluded``, for the reason ``exclusion``: "who declined it")."""
  return Found(
    "person.email",
    noun,
    [Value(e, e) for e in emails],
    excluded=[Value(e, e) for e in excluded],
    exclusion=exclusion,
    **fields,
  )


def found_money(noun: str, values: list[Value], currency: str, **fields: Any) -> Found:
  """A read that hands on amounts (``money`` values) in ``currency``, which later steps see as
  its context."""
  return Found("money", noun, values, context={"currency": currency}, **fields)


def found_home_money(ctx: AuthorContext, noun: str, amounts: list[float], **fields: Any) -> Found:
  """A read that hands on ``amounts`` in the company's own currency (the books', the payroll's)."""
  return found_money(noun, [home_money(ctx, a) for a in amounts], home_currency(ctx), **fields)


def found_time(noun: str, when: str, **fields: Any) -> Found:
  """A read that hands on the time ``when`` (ISO 8601), labelled as instructions write it, with
  its date as the context later steps may use."""
  return Found(
    "datetime", noun, [Value(when, time_label(when))], context={"date": when[:10]}, **fields
  )


def found_day(noun: str, day: str, **fields: Any) -> Found:
  """A read that hands on the date ``day`` (ISO 8601), with that date as its context."""
  return Found("date", noun, [Value(day, day)], context={"date": day}, **fields)


# --- people ------------------------------------------------------------------------------------


def user(ctx: AuthorContext) -> Person:
  """The user the agent works for (the world's first person)."""
  return world(ctx.env.seed).people[0]


def user_email(ctx: AuthorContext) -> str:
  """The user's email address."""
  return user(ctx).email


def colleague(ctx: AuthorContext) -> Person:
  """Someone at the user's company other than the user."""
  return ctx.choice(world(ctx.env.seed).people[2:])


def employee(ctx: AuthorContext, email: Any) -> Person | None:
  """The employee whose address is exactly ``email`` (callers lower-case it first), or None for
  anyone else (a customer's or a vendor's contact) and for what is no address at all."""
  return world(ctx.env.seed).person(email) if isinstance(email, str) else None


def colleague_email(ctx: AuthorContext, value: Value, reason: str = "not_an_employee") -> str:
  """The address a handed-on value names, lower-cased; refused as ``reason`` unless it is an
  employee's (a colleague's)."""
  email = str(value.value).lower()
  if employee(ctx, email) is None:
    raise AuthoringError(reason, email)
  return email


def name_of(ctx: AuthorContext, email: str) -> str:
  """A person's full name: the world's name for them, else one read off the address."""
  w = world(ctx.env.seed)
  contacts = [c for org in w.customers for c in org.contacts] + [v.contact for v in w.vendors]
  known = {p.email: p.name for p in [*w.people, *contacts]}
  local = email.split("@")[0].replace("_", ".").replace("-", ".")
  return known.get(email) or " ".join(part.capitalize() for part in local.split(".") if part)


def in_use(ctx: AuthorContext, service: str) -> set[str]:
  """The records (employees) this task's ``service`` facets set up or change: never picked
  twice, so a scenario edit never lands on a record an earlier step of the probe already wrote."""
  return ctx.scratch.setdefault(f"{service}_busy", set())


def pick_free(ctx: AuthorContext, service: str, options: Any, reserve: bool = True) -> Any:
  """One of ``options`` (records with an ``id``) that no ``service`` facet of this task has
  used yet, drawn in id order; with ``reserve``, it is marked used from then on."""
  busy = in_use(ctx, service)
  record = ctx.choice(sorted((o for o in options if o.id not in busy), key=lambda o: o.id))
  if reserve:
    busy.add(record.id)
  return record


# --- time --------------------------------------------------------------------------------------


def s0_now(ctx: AuthorContext, service: str) -> datetime:
  """s0's time: scenario records are dated before it even when earlier steps of the walk
  have already advanced the live clock (the records are put into s0, not made later)."""
  return datetime.fromisoformat(ctx.since(service))


def today(ctx: AuthorContext, service: str) -> date:
  """The service's logical date now (it moves on as the walk's writes advance its clock)."""
  return ctx.state(service).now.date()


def time_label(value: Any) -> str:
  """An ISO 8601 time as an instruction writes it: "2025-03-04 14:00"."""
  return str(value).replace("T", " ")[:16]


def day_label(day: date | str) -> str:
  """A date as a person says it: "Tuesday, March 4"."""
  day = date.fromisoformat(day) if isinstance(day, str) else day
  return f"{day:%A}, {day:%B} {day.day}"


def day_of(value: Value) -> date:
  """The date a handed-on value names (ISO 8601); refused as ``not_a_date`` otherwise."""
  try:
    return date.fromisoformat(str(value.value))
  except ValueError as err:
    raise AuthoringError("not_a_date", str(value.value)) from err


def future_time(ctx: AuthorContext, service: str, value: Value, reason: str) -> datetime:
  """The time a handed-on value names, as a write can schedule it: naive ISO 8601 and after
  the service's logical now. Refused as ``not_a_datetime``, or as ``reason`` when it carries a
  time zone or is not ahead."""
  try:
    when = datetime.fromisoformat(str(value.value))
  except ValueError as err:
    raise AuthoringError("not_a_datetime", str(value.value)) from err
  if when.tzinfo is not None or when <= ctx.state(service).now:
    raise AuthoringError(reason, str(value.value))
  return when


def schedule_time(ctx: AuthorContext, service: str, value: Value, current: Any, reason: str) -> str:
  """The time (ISO 8601, to the second) a handed-on value names, for something set to go out
  at ``current``: refused as ``time_not_schedulable`` unless it is ahead, and as ``reason``
  when it is ``current`` (nothing would change)."""
  when = iso(future_time(ctx, service, value, "time_not_schedulable"))
  if when == current:
    raise AuthoringError(reason, when)
  return when


# --- rubric conditions -------------------------------------------------------------------------


def mentions(field: str, value: Value) -> dict[str, Any]:
  """A ``where`` condition: ``field`` contains the text ``value`` stands for (any case)."""
  return where(field, str(value.value), "icontains")


def moved_to(
  service: str,
  collection: str,
  record_id: str,
  status: str,
  also: dict[str, Any],
  key: str = "status",
) -> dict[str, Any]:
  """A rubric condition: the record's ``key`` (its status) is now ``status``, and it meets the
  ``where`` condition ``also`` (what the decision recorded: a reason, an approver, a time)."""
  return all_of(
    record_is(service, collection, record_id, key, status),
    record_is(service, collection, record_id, also["field"], also["value"], also["cmp"]),
  )


def scheduled_for(
  service: str, collection: str, record_id: str, field: str, value: Value
) -> dict[str, Any]:
  """A rubric condition: the record is scheduled, its ``field`` at the time ``value`` names."""
  when = iso(datetime.fromisoformat(str(value.value)))
  return moved_to(service, collection, record_id, "scheduled", where(field, when))


# --- amounts and quantities --------------------------------------------------------------------


def money_label(amount: float, currency: str) -> str:
  """An amount as instructions and answers write it, its currency last ("1,250.00 EUR", and
  "150,000 JPY": the yen has no cents), so that ``currency_of`` can read the currency back."""
  return f"{amount:,.0f} {currency}" if currency == "JPY" else f"{amount:,.2f} {currency}"


def code_money_label(amount: float, currency: str) -> str:
  """An amount with its currency code first ("EUR 1,250.00"), as the CRM and quotes show it."""
  return f"{currency} {amount:,.2f}"


def money(amount: float, currency: str) -> Value:
  """A money value to hand on: the amount, its label, and its numeric reading."""
  return Value(amount, money_label(amount, currency), float(amount))


def home_currency(ctx: AuthorContext) -> str:
  """The company's own currency (the books' and the payroll's)."""
  return world(ctx.env.seed).currency


def home_money(ctx: AuthorContext, amount: float) -> Value:
  """A money value in the company's own currency."""
  return money(amount, home_currency(ctx))


def currency_of(value: Value) -> str | None:
  """The currency a money value was read in, when its label names one last ("1,250.00 EUR")."""
  code = value.label.rsplit(" ", 1)[-1]
  return code if re.fullmatch(r"[A-Z]{3}", code) else None


def amount_of(value: Value) -> float:
  """The number a handed-on amount stands for: its numeric reading, else the value itself;
  refused as ``not_an_amount`` when that is no number."""
  raw = value.number if value.number is not None else value.value
  try:
    return float(raw)
  except (TypeError, ValueError) as err:
    raise AuthoringError("not_an_amount", str(value.value)) from err


def amount_is(field: str, value: float, tolerance: float = 0.005) -> dict[str, Any]:
  """A rubric condition: ``field`` holds the amount ``value``, to the cent (or within
  ``tolerance``: 0.01 lets a figure written out in text round either way)."""
  return {"field": field, "cmp": "approx", "value": value, "tolerance": tolerance}


def units(value: Value, most: int = 100_000, reason: str = "not_a_quantity") -> int:
  """A whole number of units, 1 to ``most``, from a handed-on quantity (a sum may arrive as
  12.0). Refused as ``not_a_quantity`` when it is no number, and as ``reason`` when it is no
  whole number in that range."""
  try:
    number = float(value.number if value.number is not None else value.value)
  except (TypeError, ValueError) as err:
    raise AuthoringError("not_a_quantity", str(value.value)) from err
  if not number.is_integer() or not 1 <= number <= most:
    raise AuthoringError(reason, str(value.value))
  return int(number)
