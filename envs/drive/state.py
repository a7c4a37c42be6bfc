"""Drive: the records, state and constants; the service and its tools are in ``tools``."""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field

from compoworld import Record, ServiceState, Table

Role = Literal["viewer", "commenter", "editor"]
MimeType = Literal[
  "application/vnd.google-apps.document",
  "application/vnd.google-apps.spreadsheet",
  "application/pdf",
  "text/plain",
  "text/markdown",
  "text/csv",
]
ItemName = Annotated[
  str, Field(min_length=1, max_length=255, pattern=r"^[^/]+$", description="A name without '/'.")
]
DOC = "application/vnd.google-apps.document"
SHEET = "application/vnd.google-apps.spreadsheet"
PDF = "application/pdf"
#: Higher is more: an owner can do everything an editor can, and so on.
RANK = {"viewer": 1, "commenter": 2, "editor": 3, "owner": 4}


class Folder(Record):
  name: str
  parent_id: str | None  # None only for the root, "My Drive"
  owner: str
  starred: bool = False
  trashed: bool = False
  created_at: datetime
  updated_at: datetime


class File(Record):
  name: str
  mime_type: MimeType
  content: str = ""
  size_bytes: int
  owner: str
  parent_id: str
  starred: bool = False
  trashed: bool = False
  created_at: datetime
  updated_at: datetime


class Permission(Record):
  item_id: str  # a file or folder id
  grantee: str  # an email address
  role: Role
  granted_by: str
  granted_at: datetime


class ShareLink(Record):
  item_id: str
  url: str
  created_by: str
  created_at: datetime


class DriveState(ServiceState):
  folders: Table[Folder]
  files: Table[File]
  permissions: Table[Permission]
  links: Table[ShareLink]


def _link_url(item_id: str, is_folder: bool) -> str:
  token = hashlib.blake2b(item_id.encode(), digest_size=12).hexdigest()
  return (
    f"https://drive.example.com/drive/folders/{token}"
    if is_folder
    else f"https://drive.example.com/file/d/{token}/view"
  )


def _lead(w, department: str):
  """The first colleague (never the user) in a department, else the CEO."""
  return next((p for p in w.people[2:] if p.department == department), w.people[1])


#: (folder key, file name, MIME type, content). Placeholders are filled per file.
FILES = (
  (
    "planning",
    "Q{q} OKRs draft",
    DOC,
    "Objective: grow {product} revenue by {pct}%.\n"
    "KR1: close {n} new accounts such as {customer}.\nKR2: ship the {product} refresh.\n"
    "Owner: {person} ({person_email}).",
  ),
  (
    "planning",
    "Planning notes {date}",
    "text/plain",
    "Attendees: {person}, {other}.\n"
    "Decisions: budget of {cur} {amount} approved for {product}.\nNext review on {date}.",
  ),
  (
    "web",
    "Website copy - {page}",
    "text/markdown",
    "# {page}\n\n{company} helps teams like "
    "{customer} run their operations. Try the {product} today.\nContact: {person_email}",
  ),
  (
    "customer",
    "{customer} - account plan",
    DOC,
    "Account: {customer} ({industry}, {tier}).\n"
    "Main contact: {contact} <{contact_email}>, {contact_title}.\nOpportunity: {qty} x {product} "
    "({sku}) at {cur} {price} each.\nAccount owner: {person}.",
  ),
  (
    "customer",
    "{customer} - call notes {date}",
    "text/plain",
    "Call with {contact} "
    "<{contact_email}> on {date}.\nThey want {qty} units of {product} ({sku}) before {month}.\n"
    "Follow-up: {person} sends a quote.",
  ),
  (
    "proposals",
    "Proposal - {customer} - {product}",
    PDF,
    "Proposal for {customer}\n"
    "{qty} x {product} (SKU {sku}) at {cur} {price} = {cur} {total}\nValid until {date}.\n"
    "Prepared by {person} ({person_email}).",
  ),
  (
    "invoices",
    "Invoice INV-{ref} - {customer}",
    PDF,
    "Invoice INV-{ref}\nBill to: {customer}, "
    "attn. {contact} <{contact_email}>\n{qty} x {product} ({sku}) @ {cur} {price}\n"
    "Total due: {cur} {total}\nDue date: {date}",
  ),
  (
    "budgets",
    "Budget Q{q} - {dept}",
    SHEET,
    "line,amount\nSalaries,{amount}\nSoftware,{small}\nTravel,{smaller}\nOwner,{person_email}",
  ),
  ("budgets", "Vendor list", "text/csv", "vendor,category,contact\n{vendors}"),
  (
    "people",
    "Onboarding checklist - {other}",
    DOC,
    "Welcome {other}!\n1. Laptop from IT.\n"
    "2. Meet your manager {person} ({person_email}).\n3. Read the team handbook by {date}.",
  ),
  ("people", "Org chart {month}", SHEET, "name,title,manager\n{org}"),
  (
    "marketing",
    "Launch plan - {product}",
    DOC,
    "Launch of {product} ({sku}) on {date}.\n"
    "Channels: webinar, newsletter, customer stories with {customer}.\nBudget: {cur} {small}.",
  ),
  (
    "engineering",
    "Design doc - {product} sync",
    DOC,
    "Problem: {product} devices lose data "
    "offline.\nProposal: queue events on the device and sync every {n} minutes.\nAuthor: {person}.",
  ),
)
PAGES = ("Home", "Pricing", "About us", "Customers", "Careers")
