"""Drive: the seeded data generator, a base of the service class in ``tools``."""

from __future__ import annotations

from datetime import datetime, timedelta

from envs._world import seeded
from envs.drive.state import (
  FILES,
  PAGES,
  DriveState,
  File,
  Folder,
  Permission,
  ShareLink,
  _lead,
  _link_url,
)


class DriveData:
  """Draws the initial state from a seed: ``generate`` and the helpers only it uses."""

  @classmethod
  def generate(cls, seed: int, size: int | None) -> DriveState:
    rng, w, state = seeded(cls, seed)
    me, now = w.people[0], state.now
    sales, finance, hr = _lead(w, "Sales"), _lead(w, "Finance"), _lead(w, "People")
    eng, mkt = _lead(w, "Engineering"), _lead(w, "Marketing")

    def ago(max_days: int) -> datetime:
      return now - timedelta(days=rng.randint(1, max_days), hours=rng.randint(0, 9))

    def folder(name: str, parent: str | None, owner, trashed: bool = False) -> str:
      fid = state.new_id("fld")
      made = ago(200)
      state.folders.insert(
        Folder(
          id=fid,
          name=name,
          parent_id=parent,
          owner=owner.email,
          starred=rng.random() < 0.15,
          trashed=trashed,
          created_at=made,
          updated_at=made,
        )
      )
      return fid

    def grant(item_id: str, who: str, role: str, by: str) -> None:
      state.permissions.insert(
        Permission(
          id=state.new_id("perm"),
          item_id=item_id,
          grantee=who,
          role=role,
          granted_by=by,
          granted_at=ago(90),
        )
      )

    root = folder("My Drive", None, me)
    projects = folder("Projects", root, me)
    keys = {"planning": [folder("Q2 Planning", projects, me)]}
    keys["web"] = [folder("Website Relaunch", projects, me)]
    sales_dir = folder("Sales", root, sales)
    customers = folder("Customers", sales_dir, sales)
    accounts = rng.sample(w.customers, 4)
    keys["customer"] = [folder(c.name, customers, sales) for c in accounts]
    keys["proposals"] = [folder("Proposals", sales_dir, sales)]
    finance_dir = folder("Finance", root, finance)
    keys["invoices"] = [folder("Invoices", finance_dir, finance)]
    keys["budgets"] = [folder("Budgets", finance_dir, finance)]
    keys["people"] = [folder("People", root, hr)]
    keys["marketing"] = [folder("Marketing", root, me)]
    keys["engineering"] = [folder("Engineering", root, eng)]
    old = folder("Old drafts", root, me, trashed=True)
    keys["planning"].append(old)
    # Folder grants give the user every kind of access somewhere: editor on Sales, viewer on
    # Finance, commenter on People, nothing at all on Engineering.
    grant(sales_dir, me.email, "editor", sales.email)
    grant(finance_dir, me.email, "viewer", finance.email)
    grant(keys["people"][0], me.email, "commenter", hr.email)
    grant(keys["marketing"][0], mkt.email, "editor", me.email)
    grant(keys["planning"][0], rng.choice(w.people[2:]).email, "commenter", me.email)
    sellers = [p for p in w.people[2:] if p.department == "Sales" and p is not sales]
    if sellers:
      grant(sales_dir, rng.choice(sellers).email, "viewer", sales.email)

    folder_owner = {f.id: f.owner for f in state.folders}
    vendors = "\n".join(f"{v.name},{v.category},{v.contact.email}" for v in w.vendors)
    org = "\n".join(f"{p.name},{p.title},{p.manager_email or ''}" for p in w.people[:12])
    for i in range(size if size is not None else 40):
      key, name, mime, text = FILES[i % len(FILES)] if i < len(FILES) else rng.choice(FILES)
      parent = rng.choice(keys[key])
      if key == "customer":
        customer = accounts[keys["customer"].index(parent)]
      else:
        customer = rng.choice(w.customers)
      contact, product = rng.choice(customer.contacts), rng.choice(w.products)
      person, other = rng.sample(w.people[1:], 2)
      qty = rng.choice((5, 10, 20, 25, 50, 100))
      day = (now + timedelta(days=rng.randint(-30, 45))).date()
      # Grouped so that each line stays a one-liner: the values every template may use.
      fill = dict(q=rng.choice((1, 2, 3)), pct=rng.choice((10, 15, 20)), n=rng.randint(3, 12))
      fill.update(product=product.name, sku=product.sku, qty=qty, cur=w.currency)
      fill.update(price=f"{product.unit_price:,.2f}", total=f"{qty * product.unit_price:,.2f}")
      fill.update(customer=customer.name, industry=customer.industry, tier=customer.tier)
      fill.update(contact=contact.name, contact_email=contact.email, contact_title=contact.title)
      fill.update(person=person.name, person_email=person.email, other=other.name)
      fill.update(date=day.isoformat(), month=day.strftime("%B"), ref=rng.randint(10000, 99999))
      fill.update(amount=f"{rng.randint(40, 900) * 1000:,}", small=f"{rng.randint(5, 60) * 1000:,}")
      fill.update(smaller=f"{rng.randint(1, 20) * 500:,}", dept=rng.choice(("Sales", "Ops")))
      fill.update(page=rng.choice(PAGES), company=w.company, vendors=vendors, org=org)
      content = text.format(**fill)
      owner = folder_owner[parent] if rng.random() < 0.8 else person.email
      updated = ago(60)
      fid = state.new_id("file")
      state.files.insert(
        File(
          id=fid,
          name=name.format(**fill),
          mime_type=mime,
          content=content,
          size_bytes=len(content.encode()),
          owner=owner,
          parent_id=parent,
          starred=rng.random() < 0.15,
          trashed=rng.random() < 0.08,
          created_at=updated - timedelta(days=rng.randint(0, 40)),
          updated_at=updated,
        )
      )
      if rng.random() < 0.25:
        who = contact.email if key in ("proposals", "invoices") else other.email
        grant(fid, who, rng.choice(("viewer", "commenter", "editor")), owner)
      if key == "proposals" and rng.random() < 0.5:
        state.links.insert(
          ShareLink(
            id=state.new_id("link"),
            item_id=fid,
            url=_link_url(fid, False),
            created_by=owner,
            created_at=updated,
          )
        )
    return state
