"""Inventory facets: stock held for sales orders and stock on the shelf as sources of skus and
quantities; receipts, reorder points and reservations as sinks; the hold-for-an-order revisit
(the units available drop once some are reserved)."""

from __future__ import annotations

from datetime import timedelta

from compoworld.tasks.authoring import AuthorContext, AuthoringError
from compoworld.tasks.facets import Found, Value, facets
from compoworld.tasks.rubric import exists, record_is, where
from envs._facets_common import found_one, fresh_number, iso, s0_now, since, units

S = "inventory"


def _quantity(n: int) -> Value:
  return Value(n, str(n), float(n))


def _order_ref(ctx: AuthorContext) -> str:
  """A sales order number no stock record mentions yet."""
  state = ctx.state(S)
  used = {r.order_reference for r in state.reservations} | {m.reference for m in state.movements}
  return fresh_number(ctx, "SO-{}", (10000, 99999), used, "no_fresh_reference")


def _warehouse(ctx: AuthorContext, code: str | None = None) -> dict:
  """A warehouse as the agent finds it: by listing them (codes are not in the instruction)."""
  listed = ctx.call(S, "list_warehouses")
  if code is None:
    return ctx.choice(listed)
  return next(w for w in listed if w["id"] == code)


def _stocked(ctx: AuthorContext, sku: str) -> dict:
  """The stocked product of ``sku``; software and services are never stocked here."""
  product = ctx.state(S).products.find(sku)
  if product is None:
    raise AuthoringError("sku_not_stocked", str(sku))
  return {"sku": product.id, "name": product.name}


def _untouched(ctx: AuthorContext) -> list:
  """Stock levels no step of the walk has changed yet. The scenario edits only these: an edit
  is replayed before the walk's writes, so it must not build on them."""
  s0 = s0_now(ctx, S)
  return sorted((lv for lv in ctx.state(S).levels if lv.updated_at < s0), key=lambda lv: lv.id)


def _roomy_level(ctx: AuthorContext, at_least: int):
  """A stock level with plenty of units available (the best few, so the pick varies)."""
  levels = sorted(_untouched(ctx), key=lambda lv: (lv.reserved - lv.on_hand, lv.id))
  levels = [lv for lv in levels if lv.on_hand - lv.reserved >= at_least][:4]
  return ctx.choice(levels)


# --- sources -------------------------------------------------------------------------------


def _hold(ctx: AuthorContext, lines: int) -> str:
  """Puts a sales order's reservations (distinct quantities, one warehouse) and returns its
  order number; the levels' reserved counts follow, as reserving would have done."""
  state = ctx.state(S)
  code = ctx.choice(sorted(state.warehouses.ids()))
  levels = [lv for lv in _untouched(ctx) if lv.warehouse == code and lv.on_hand - lv.reserved >= 10]
  if len(levels) < lines:
    raise AuthoringError("not_enough_stock", code)
  ref = _order_ref(ctx)
  for lv, qty in zip(
    ctx.rng.sample(levels, lines), ctx.rng.sample(range(2, 10), lines), strict=True
  ):
    ctx.put(
      S,
      "reservations",
      {
        "id": ctx.fresh_id("res"),
        "sku": lv.sku,
        "warehouse": code,
        "quantity": qty,
        "order_reference": ref,
        "status": "active",
        "created_at": iso(s0_now(ctx, S) - timedelta(hours=ctx.rng.randint(2, 30))),
      },
    )
    ctx.update(S, "levels", lv.id, reserved=lv.reserved + qty)
  return ref


@facets.source(S, "sku")
def held_product(ctx: AuthorContext) -> Found:
  """One product is on hold for a sales order; the step hands on its sku."""
  ref = _hold(ctx, 1)
  held = ctx.call(S, "list_reservations", order_reference=ref)["items"]
  return Found(
    "sku",
    f"the sku of the product on hold for sales order {ref}",
    [Value(r["sku"], r["sku"]) for r in held],
  )


@facets.source(S, "quantity")
def held_quantities(ctx: AuthorContext) -> Found:
  """Several products are on hold for one sales order: one quantity per product, to be summed
  or used one by one."""
  ref = _hold(ctx, 3)
  held = ctx.call(S, "list_reservations", order_reference=ref)["items"]
  return Found(
    "quantity",
    f"the number of units on hold for each product of sales order {ref}",
    [_quantity(r["quantity"]) for r in held],
  )


@facets.source(S, "quantity")
def available_units(ctx: AuthorContext) -> Found:
  """Units of one product available in one warehouse (on hand minus reserved)."""
  level = _roomy_level(ctx, 5)
  name = ctx.state(S).products.get(level.sku).name
  wh = _warehouse(ctx, level.warehouse)
  hit = next(p for p in ctx.call(S, "search_products", query=name)["items"] if p["name"] == name)
  stock = ctx.call(S, "get_stock", sku=hit["id"], warehouse=wh["id"])
  return Found(
    "quantity",
    f"the number of units of the {name} available in the {wh['name']}",
    [_quantity(stock["available"])],
  )


# --- lookups -------------------------------------------------------------------------------


@facets.lookup(S, "sku", "quantity")
def available_everywhere(ctx: AuthorContext, found: Found) -> Found | None:
  """The units of a product available across all warehouses."""
  sku = found.values[0].value
  if ctx.state(S).products.find(sku) is None:
    return None
  stock = ctx.call(S, "get_stock", sku=sku)
  n = stock["available"]
  return Found(
    "quantity",
    "the number of units of that product available across all our warehouses",
    [_quantity(n)],
    answer=f"{n} units of the {stock['name']} ({sku}) are available across all warehouses.",
  )


@facets.lookup(S, "sku", "product.name")
def product_name(ctx: AuthorContext, found: Found) -> Found | None:
  """What the stock list calls a sku."""
  sku = found.values[0].value
  hit = next(
    (p for p in ctx.call(S, "search_products", query=sku)["items"] if p["id"] == sku), None
  )
  if hit is None:
    return None
  return found_one(
    "product.name",
    "the name of that product in our stock list",
    hit["name"],
    answer=f"{sku} is the {hit['name']}.",
  )


# --- sinks ---------------------------------------------------------------------------------


def _receipt_target(ctx: AuthorContext) -> dict:
  note = f"DN-{ctx.rng.randint(40000, 49999)}"  # a delivery note: no generated movement has one
  return {"wh": _warehouse(ctx), "qty": ctx.choice((12, 24, 36, 48)), "note": note}


def _receive(ctx: AuthorContext, t: dict, v: Value) -> None:
  _stocked(ctx, v.value)
  ctx.call(
    S, "receive_stock", sku=v.value, warehouse=t["wh"]["id"], quantity=t["qty"], reference=t["note"]
  )


facets.sink(
  S,
  "sku",
  "receive_units",
  prepare=_receipt_target,
  act=_receive,
  check=lambda ctx, t, v: exists(
    S,
    "movements",
    where("sku", v.value),
    where("warehouse", t["wh"]["id"]),
    where("reason", "receipt"),
    where("reference", t["note"]),
    where("delta", t["qty"]),
  ),
  phrase=lambda ctx, t, obj: (
    f"log the arrival of {t['qty']} units of {obj} at the {t['wh']['name']} under delivery "
    f"note {t['note']}"
  ),
  text=lambda ctx, t, v: (
    f"{t['qty']} units of {v.label} were received into the {t['wh']['name']} ({t['note']})."
  ),
)


def _reorder_target(ctx: AuthorContext) -> dict:
  """A warehouse and a reorder point no item there has yet (so the check is false at s0)."""
  wh = _warehouse(ctx)
  taken = {lv.reorder_point for lv in ctx.state(S).levels if lv.warehouse == wh["id"]}
  point = ctx.choice([p for p in (40, 75, 90, 120, 160, 180, 220, 250) if p not in taken])
  return {"wh": wh, "point": point}


def _set_reorder(ctx: AuthorContext, t: dict, v: Value) -> None:
  _stocked(ctx, v.value)
  ctx.call(S, "set_reorder_point", sku=v.value, warehouse=t["wh"]["id"], reorder_point=t["point"])


facets.sink(
  S,
  "sku",
  "set_reorder_point",
  prepare=_reorder_target,
  act=_set_reorder,
  check=lambda ctx, t, v: record_is(
    S, "levels", f"{v.value}@{t['wh']['id']}", "reorder_point", t["point"]
  ),
  phrase=lambda ctx, t, obj: (
    f"set the reorder point of {obj} in the {t['wh']['name']} to {t['point']} units"
  ),
  text=lambda ctx, t, v: (
    f"The reorder point of {v.label} in the {t['wh']['name']} is {t['point']}."
  ),
)


def _receive_against(ctx: AuthorContext, t: dict, v: Value) -> None:
  ctx.call(
    S,
    "receive_stock",
    sku=t["sku"],
    warehouse=t["wh"]["id"],
    quantity=t["qty"],
    reference=str(v.value),
  )


def _po_receipt_target(ctx: AuthorContext) -> dict:
  level = _roomy_level(ctx, 1)
  product = _stocked(ctx, level.sku)
  return {**product, "wh": _warehouse(ctx, level.warehouse), "qty": ctx.choice((10, 20, 30, 50))}


facets.sink(
  S,
  "reference",
  "receive_against_reference",
  prepare=_po_receipt_target,
  act=_receive_against,
  check=lambda ctx, t, v: exists(
    S,
    "movements",
    where("reference", str(v.value)),
    where("sku", t["sku"]),
    where("warehouse", t["wh"]["id"]),
    where("reason", "receipt"),
    where("delta", t["qty"]),
    since(ctx, S, "at"),
  ),
  phrase=lambda ctx, t, obj: (
    f"receive {t['qty']} units of the {t['name']} ({t['sku']}) into the {t['wh']['name']} "
    f"with {obj} as the reference"
  ),
  text=lambda ctx, t, v: (
    f"{t['qty']} units of {t['sku']} were received into the {t['wh']['name']} under {v.label}."
  ),
)


def _restock(ctx: AuthorContext, level, units_in: int) -> None:
  """Puts a delivery that has just been received (the ledger and the level agree)."""
  ctx.put(
    S,
    "movements",
    {
      "id": ctx.fresh_id("mov"),
      "sku": level.sku,
      "warehouse": level.warehouse,
      "delta": units_in,
      "reason": "receipt",
      "reference": f"PO-{ctx.rng.randint(10000, 10999)}",
      "on_hand_after": level.on_hand + units_in,
      "at": iso(s0_now(ctx, S) - timedelta(hours=ctx.rng.randint(1, 6))),
    },
  )
  ctx.update(S, "levels", level.id, on_hand=level.on_hand + units_in)


def _hold_target(ctx: AuthorContext) -> dict:
  """A product and warehouse where a big delivery has just landed (so whatever quantity the
  walk brings can be held), and a new order number."""
  level = _roomy_level(ctx, 1)
  _restock(ctx, level, ctx.choice((800, 1000, 1200)))
  product = _stocked(ctx, level.sku)
  return {**product, "wh": _warehouse(ctx, level.warehouse), "ref": _order_ref(ctx)}


def _reserve(ctx: AuthorContext, t: dict, v: Value) -> None:
  qty = units(v)
  level = ctx.state(S).levels.find(f"{t['sku']}@{t['wh']['id']}")
  if level is None or qty > level.on_hand - level.reserved:
    raise AuthoringError("not_enough_stock", f"{qty} of {t['sku']}")
  ctx.call(
    S,
    "reserve_stock",
    sku=t["sku"],
    warehouse=t["wh"]["id"],
    quantity=qty,
    order_reference=t["ref"],
  )


def _reserve_check(ctx: AuthorContext, t: dict, v: Value) -> dict:
  return exists(
    S,
    "reservations",
    where("order_reference", t["ref"]),
    where("sku", t["sku"]),
    where("warehouse", t["wh"]["id"]),
    where("quantity", v.value),
    where("status", "active"),
  )


def _reserve_phrase(ctx: AuthorContext, t: dict, obj: str) -> str:
  amount = "one reservation for each of those quantities" if obj == "each of them" else obj
  return (
    f"reserve units of the {t['name']} ({t['sku']}) in the {t['wh']['name']} for sales order "
    f"{t['ref']}: {amount}"
  )


facets.sink(
  S,
  "quantity",
  "reserve_units",
  total="reserve_total",
  prepare=_hold_target,
  act=_reserve,
  check=_reserve_check,
  phrase=_reserve_phrase,
  text=lambda ctx, t, v: (
    f"{v.label} units of {t['sku']} are reserved in the {t['wh']['name']} for {t['ref']}."
  ),
)


# --- the revisit: read what is available, hold some for an order, read it again ------------


def _available_first(ctx: AuthorContext) -> tuple[Found, dict]:
  """A delivery just landed, so there is room to hold whatever quantity the walk brings."""
  level = _roomy_level(ctx, 1)
  _restock(ctx, level, ctx.choice((400, 600, 800)))
  product = _stocked(ctx, level.sku)
  wh = _warehouse(ctx, level.warehouse)
  stock = ctx.call(S, "get_stock", sku=level.sku, warehouse=wh["id"])
  target = {**product, "wh": wh, "ref": _order_ref(ctx), "available": stock["available"]}
  found = Found(
    "quantity",
    f"the number of units of the {product['name']} available in the {wh['name']}",
    [_quantity(stock["available"])],
  )
  return found, target


def _available_second(ctx: AuthorContext, t: dict) -> Found:
  stock = ctx.call(S, "get_stock", sku=t["sku"], warehouse=t["wh"]["id"])
  n = stock["available"]
  return Found(
    "quantity",
    f"the number of units of the {t['name']} now available in the {t['wh']['name']}",
    [_quantity(n)],
    stale=t["available"],
    answer=f"{n} units of the {t['name']} are now available in the {t['wh']['name']}.",
  )


facets.revisit(
  S,
  kind="quantity",
  kind_in="quantity",
  kind_after="quantity",
  name="available_after_hold",
  first=_available_first,
  second=_available_second,
  change="hold_for_order",
  act=_reserve,
  check=_reserve_check,
  phrase=_reserve_phrase,
  text=lambda ctx, t, v: f"{v.label} units of {t['sku']} are held for {t['ref']}.",
)
