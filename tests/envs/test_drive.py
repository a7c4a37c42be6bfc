from collections import Counter

import pytest

from envs._world import world
from envs.drive import DriveService
from tests.contract import call_fails, call_ok

SEED = 3
ME = world(SEED).people[0].email


@pytest.fixture
def drive():
  return DriveService.create(seed=SEED)


def folder(drive, name):
  return next(f for f in drive.state.folders if f.name == name)


def root(drive):
  return next(f for f in drive.state.folders if f.parent_id is None)


def file_with_role(drive, role):
  """The first file not in the trash on which the user has ``role``."""
  for f in sorted(drive.state.files, key=lambda f: f.id):
    info = call_ok(drive, "get_file", {"file_id": f.id})
    if info["your_role"] == role and not info["in_trash"]:
      return info
  raise AssertionError(f"no file with role {role}")


def test_seeded_data_is_sized():
  a = DriveService.create(seed=5)
  assert len(a.state.files) == 40 and len(DriveService.create(seed=5, size=120).state.files) == 120
  roots = [f for f in a.state.folders if f.parent_id is None]
  assert [r.name for r in roots] == ["My Drive"] and roots[0].owner == world(5).people[0].email
  assert all(f.parent_id in a.state.folders for f in a.state.files)
  roles = Counter(a._role(f) for f in a.state.files)
  assert {"owner", "editor", "viewer", "commenter"} <= set(roles)
  assert any(f.trashed for f in a.state.folders) and len(a.state.permissions) > 5
  assert all(f.size_bytes == len(f.content.encode()) for f in a.state.files)
  assert all(f.updated_at < a.state.now and f.created_at <= f.updated_at for f in a.state.files)


def test_list_folder_pages_and_hides_trash(drive):
  top = call_ok(drive, "list_folder", {"limit": 100})
  assert top["folder"] == {"id": root(drive).id, "path": "My Drive"}
  names = [i["name"] for i in top["items"]]
  assert "Sales" in names and "Old drafts" not in names
  kinds = [i["kind"] for i in top["items"]]
  assert kinds == sorted(kinds, key=lambda k: k != "folder")
  every = call_ok(drive, "list_folder", {"include_trashed": True, "limit": 100})
  assert "Old drafts" in [i["name"] for i in every["items"]] and every["total"] == top["total"] + 1
  sales = folder(drive, "Sales")
  page = call_ok(drive, "list_folder", {"folder_id": sales.id, "limit": 1})
  assert page["folder"]["path"] == "My Drive/Sales" and page["next_offset"] == 1
  assert page["items"][0]["name"] == "Customers" and page["total"] == 2


def test_search_files_filters(drive):
  page = call_ok(drive, "search_files", {"limit": 100})
  trashed = {f.id for f in drive.state.files if drive._trashed_by(f)}
  assert page["total"] == 40 - len(trashed) and trashed
  assert {i["id"] for i in page["items"]}.isdisjoint(trashed)
  assert "content" not in page["items"][0]
  stamps = [i["updated_at"] for i in page["items"]]
  assert stamps == sorted(stamps, reverse=True)
  everything = call_ok(drive, "search_files", {"include_trashed": True, "limit": 100})
  assert everything["total"] == 40
  pdfs = call_ok(drive, "search_files", {"mime_type": "application/pdf", "limit": 100})["items"]
  assert pdfs and all(i["mime_type"] == "application/pdf" for i in pdfs)
  sales = folder(drive, "Sales")
  inside = call_ok(drive, "search_files", {"folder_id": sales.id, "limit": 100})["items"]
  assert inside and all(
    "/Sales/" in call_ok(drive, "get_file", {"file_id": i["id"]})["path"] for i in inside
  )
  some = drive.state.files.get(inside[0]["id"])
  word = some.content.split()[2]
  hits = call_ok(drive, "search_files", {"query": word.upper(), "limit": 100})["items"]
  assert some.id in [i["id"] for i in hits]
  named = call_ok(drive, "search_files", {"name": "proposal", "limit": 100})["items"]
  assert named and all("proposal" in i["name"].lower() for i in named)
  owner = some.owner
  mine = call_ok(drive, "search_files", {"owner": owner.upper(), "limit": 100})["items"]
  assert mine and all(i["owner"] == owner for i in mine)
  starred = call_ok(drive, "search_files", {"starred_only": True, "limit": 100})["items"]
  assert all(i["starred"] for i in starred)
  recent = call_ok(drive, "search_files", {"modified_after": "2026-02-15T00:00:00", "limit": 100})[
    "items"
  ]
  assert all(i["updated_at"] >= "2026-02-15" for i in recent)
  older = call_ok(drive, "search_files", {"modified_before": "2026-02-15T00:00:00", "limit": 100})
  assert len(recent) + older["total"] == page["total"]
  assert call_ok(drive, "search_files", {"query": "zebra quantum"})["items"] == []


def test_get_file_content_and_permissions(drive):
  info = file_with_role(drive, "editor")
  stored = drive.state.files.get(info["id"])
  assert info["owner"] == stored.owner != ME and "content" not in info
  assert info["path"].startswith("My Drive/") and info["path"].endswith(stored.name)
  text = call_ok(drive, "read_file_content", {"file_id": info["id"]})
  assert text["content"] == stored.content and text["mime_type"] == stored.mime_type
  sales = folder(drive, "Sales")
  perms = call_ok(drive, "list_permissions", {"item_id": sales.id})
  assert perms[0] == {"email": sales.owner, "role": "owner", "inherited_from": None}
  assert {"email": ME, "role": "editor", "inherited_from": None} in perms
  deep = folder(drive, "Customers")
  inherited = call_ok(drive, "list_permissions", {"item_id": deep.id})
  assert {"email": ME, "role": "editor", "inherited_from": sales.id} in inherited
  linked = next(iter(drive.state.links))
  assert call_ok(drive, "get_file", {"file_id": linked.item_id})["link"] == linked.url


def test_create_update_rename_move_star(drive):
  made = call_ok(drive, "create_folder", {"name": "Board"})
  assert made["parent_id"] == root(drive).id and made["owner"] == ME
  assert drive.state.folders.get(made["id"]).name == "Board"
  doc = call_ok(
    drive, "create_file", {"name": "Deck notes", "content": "héllo", "parent_id": made["id"]}
  )
  assert doc["size_bytes"] == 6 and doc["mime_type"] == "application/vnd.google-apps.document"
  assert drive.state.files.get(doc["id"]).parent_id == made["id"]
  csv = call_ok(drive, "create_file", {"name": "a.csv", "content": "a,b", "mime_type": "text/csv"})
  assert csv["parent_id"] == root(drive).id
  upd = call_ok(drive, "update_file_content", {"file_id": doc["id"], "content": "four"})
  assert upd["size_bytes"] == 4 and drive.state.files.get(doc["id"]).content == "four"
  assert upd["updated_at"] > doc["updated_at"]
  ren = call_ok(drive, "rename_item", {"item_id": made["id"], "name": "Board 2026"})
  assert ren["kind"] == "folder" and drive.state.folders.get(made["id"]).name == "Board 2026"
  sales = folder(drive, "Sales")
  moved = call_ok(drive, "move_item", {"item_id": made["id"], "folder_id": sales.id})
  assert moved["path"] == "My Drive/Sales/Board 2026"
  assert drive.state.folders.get(made["id"]).parent_id == sales.id
  # An editor of a colleague's file may move it between folders they can edit.
  theirs = file_with_role(drive, "editor")
  call_ok(drive, "move_item", {"item_id": theirs["id"], "folder_id": made["id"]})
  assert drive.state.files.get(theirs["id"]).parent_id == made["id"]
  starred = call_ok(drive, "star_item", {"item_id": doc["id"]})
  assert starred["starred"] and drive.state.files.get(doc["id"]).starred
  call_ok(drive, "star_item", {"item_id": doc["id"], "starred": False})
  assert not drive.state.files.get(doc["id"]).starred


def test_share_revoke_and_link(drive):
  doc = call_ok(drive, "create_file", {"name": "Plan", "content": "x"})
  perm = call_ok(
    drive, "share_item", {"item_id": doc["id"], "email": "Kim@Example.com", "role": "commenter"}
  )
  assert perm["grantee"] == "kim@example.com" and perm["granted_by"] == ME
  assert drive.state.permissions.get(perm["id"]).role == "commenter"
  again = call_ok(
    drive, "share_item", {"item_id": doc["id"], "email": "kim@example.com", "role": "editor"}
  )
  assert again["id"] == perm["id"] and drive.state.permissions.get(perm["id"]).role == "editor"
  viewer = call_ok(drive, "share_item", {"item_id": doc["id"], "email": "lee@example.com"})
  assert viewer["role"] == "viewer"
  gone = call_ok(drive, "revoke_access", {"item_id": doc["id"], "email": "kim@example.com"})
  assert gone["id"] == perm["id"] and perm["id"] not in drive.state.permissions
  emails = [p["email"] for p in call_ok(drive, "list_permissions", {"item_id": doc["id"]})]
  assert emails == [ME, "lee@example.com"]
  link = call_ok(drive, "create_share_link", {"item_id": doc["id"]})
  assert link["url"].startswith("https://drive.example.com/file/d/") and link["created_by"] == ME
  assert drive.state.links.get(link["id"]).item_id == doc["id"]
  folder_link = call_ok(drive, "create_share_link", {"item_id": folder(drive, "Sales").id})
  assert "/drive/folders/" in folder_link["url"]


def test_trash_restore_delete_forever(drive):
  box = call_ok(drive, "create_folder", {"name": "Box"})
  inner = call_ok(drive, "create_folder", {"name": "Inner", "parent_id": box["id"]})
  doc = call_ok(drive, "create_file", {"name": "Memo", "content": "m", "parent_id": inner["id"]})
  call_ok(drive, "share_item", {"item_id": doc["id"], "email": "kim@example.com"})
  call_ok(drive, "create_share_link", {"item_id": doc["id"]})
  assert call_ok(drive, "trash_item", {"item_id": box["id"]})["trashed"]
  info = call_ok(drive, "get_file", {"file_id": doc["id"]})
  assert info["in_trash"] and not info["trashed"]
  assert doc["id"] not in [i["id"] for i in call_ok(drive, "search_files", {"limit": 100})["items"]]
  call_fails(drive, "restore_item", {"item_id": doc["id"]}, 409, "not in the trash", box["id"])
  call_fails(drive, "trash_item", {"item_id": inner["id"]}, 409, "in the trash", box["id"])
  call_ok(drive, "restore_item", {"item_id": box["id"]})
  assert not drive.state.folders.get(box["id"]).trashed
  call_ok(drive, "trash_item", {"item_id": doc["id"]})
  call_ok(drive, "trash_item", {"item_id": inner["id"]})
  call_fails(drive, "restore_item", {"item_id": doc["id"]}, 409, "restore that folder first")
  call_ok(drive, "restore_item", {"item_id": inner["id"]})
  assert drive.state.files.get(doc["id"]).trashed  # trashed on its own, so still trashed
  call_ok(drive, "trash_item", {"item_id": inner["id"]})
  gone = call_ok(drive, "delete_forever", {"item_id": inner["id"]})
  assert gone == {"deleted": sorted([inner["id"], doc["id"]])}
  assert inner["id"] not in drive.state.folders and doc["id"] not in drive.state.files
  assert not [p for p in drive.state.permissions if p.item_id == doc["id"]]
  assert not [x for x in drive.state.links if x.item_id == doc["id"]]
  assert box["id"] in drive.state.folders


def test_role_rules(drive):
  viewer = file_with_role(drive, "viewer")
  commenter = file_with_role(drive, "commenter")
  for info in (viewer, commenter):
    call_fails(drive, "update_file_content", {"file_id": info["id"], "content": "x"}, 409, "only")
    call_fails(drive, "rename_item", {"item_id": info["id"], "name": "x"}, 409, info["owner"])
    call_fails(drive, "share_item", {"item_id": info["id"], "email": "a@b.com"}, 409, "share")
    call_fails(drive, "trash_item", {"item_id": info["id"]}, 409, "editor")
    call_fails(drive, "create_share_link", {"item_id": info["id"]}, 409, "editor")
  nobody = file_with_role(drive, None)
  call_fails(
    drive, "revoke_access", {"item_id": nobody["id"], "email": "a@b.com"}, 409, "no access"
  )
  finance = folder(drive, "Finance")
  call_fails(drive, "create_folder", {"name": "x", "parent_id": finance.id}, 409, "viewer")
  call_fails(
    drive, "create_file", {"name": "x", "content": "", "parent_id": finance.id}, 409, "viewer"
  )
  mine = call_ok(drive, "create_file", {"name": "mine", "content": "x"})
  call_fails(drive, "move_item", {"item_id": mine["id"], "folder_id": finance.id}, 409, "viewer")
  call_fails(drive, "move_item", {"item_id": viewer["id"], "folder_id": root(drive).id}, 409)
  # An editor may trash a colleague's file, but only its owner deletes it forever.
  theirs = file_with_role(drive, "editor")
  call_ok(drive, "trash_item", {"item_id": theirs["id"]})
  call_fails(drive, "delete_forever", {"item_id": theirs["id"]}, 409, "only the owner")


def test_business_rule_conflicts(drive):
  top, sales = root(drive), folder(drive, "Sales")
  customers = folder(drive, "Customers")
  call_fails(drive, "rename_item", {"item_id": top.id, "name": "Mine"}, 409, "root")
  call_fails(drive, "move_item", {"item_id": top.id, "folder_id": sales.id}, 409, "root")
  call_fails(drive, "trash_item", {"item_id": top.id}, 409, "root")
  call_fails(drive, "rename_item", {"item_id": sales.id, "name": "Sales"}, 409, "already named")
  call_fails(drive, "move_item", {"item_id": sales.id, "folder_id": sales.id}, 409, "itself")
  call_fails(drive, "move_item", {"item_id": sales.id, "folder_id": customers.id}, 409, "itself")
  call_fails(drive, "move_item", {"item_id": customers.id, "folder_id": sales.id}, 409, "already")
  old = folder(drive, "Old drafts")
  call_fails(drive, "create_file", {"name": "x", "content": "", "parent_id": old.id}, 409, "trash")
  call_fails(drive, "move_item", {"item_id": customers.id, "folder_id": old.id}, 409, "trash")
  call_fails(drive, "trash_item", {"item_id": old.id}, 409, "in the trash")
  call_fails(drive, "rename_item", {"item_id": old.id, "name": "x"}, 409, "restore it first")
  call_fails(drive, "restore_item", {"item_id": sales.id}, 409, "not in the trash")
  call_fails(drive, "delete_forever", {"item_id": sales.id}, 409, "trash it first")
  call_fails(drive, "share_item", {"item_id": sales.id, "email": sales.owner}, 409, "owns")
  call_fails(
    drive, "share_item", {"item_id": sales.id, "email": ME, "role": "editor"}, 409, "already"
  )
  call_fails(drive, "revoke_access", {"item_id": sales.id, "email": sales.owner}, 409, "owner")
  call_fails(drive, "revoke_access", {"item_id": customers.id, "email": ME}, 409, sales.id)
  call_fails(drive, "revoke_access", {"item_id": sales.id, "email": "zz@x.com"}, 404, "zz@x.com")
  starred = next(f for f in drive.state.folders if f.starred)
  call_fails(drive, "star_item", {"item_id": starred.id}, 409, "already starred")
  call_fails(drive, "star_item", {"item_id": sales.id, "starred": False}, 409, "not starred")
  linked = next(iter(drive.state.links))
  call_fails(drive, "create_share_link", {"item_id": linked.item_id}, 409, linked.url)


def test_argument_errors_and_unknown_ids(drive):
  fid = next(iter(drive.state.files)).id
  call_fails(drive, "get_file", {}, 400, "file_id")
  call_fails(drive, "get_file", {"file_id": 3}, 400, "file_id", "string")
  call_fails(drive, "list_folder", {"limit": 0}, 400, "limit")
  call_fails(drive, "search_files", {"offset": -1}, 400, "offset")
  call_fails(drive, "search_files", {"mime_type": "image/gif"}, 400, "mime_type")
  call_fails(drive, "search_files", {"owner": "nobody"}, 400, "owner")
  call_fails(
    drive,
    "search_files",
    {"modified_after": "2026-03-01T00:00", "modified_before": "2026-02-01T00:00"},
    400,
    "modified_before",
  )
  call_fails(drive, "create_folder", {"name": ""}, 400, "name")
  call_fails(drive, "create_folder", {"name": "a/b"}, 400, "name")
  call_fails(drive, "create_file", {"name": "x"}, 400, "content")
  call_fails(drive, "rename_item", {"item_id": fid, "name": "a/b"}, 400, "name")
  call_fails(
    drive, "share_item", {"item_id": fid, "email": "x@y.com", "role": "owner"}, 400, "role"
  )
  call_fails(drive, "share_item", {"item_id": fid, "email": "nope"}, 400, "email")
  call_fails(drive, "star_item", {"item_id": fid, "starred": "maybe"}, 400, "starred")
  folder_id = root(drive).id
  for tool, args in (
    ("list_folder", {"folder_id": "fld_nope"}),
    ("search_files", {"folder_id": "fld_nope"}),
    ("get_file", {"file_id": "fld_nope"}),
    ("read_file_content", {"file_id": "fld_nope"}),
    ("list_permissions", {"item_id": "fld_nope"}),
    ("create_folder", {"name": "x", "parent_id": "fld_nope"}),
    ("create_file", {"name": "x", "content": "", "parent_id": "fld_nope"}),
    ("update_file_content", {"file_id": "fld_nope", "content": ""}),
    ("rename_item", {"item_id": "fld_nope", "name": "x"}),
    ("move_item", {"item_id": "fld_nope", "folder_id": folder_id}),
    ("move_item", {"item_id": fid, "folder_id": "fld_nope"}),
    ("star_item", {"item_id": "fld_nope"}),
    ("share_item", {"item_id": "fld_nope", "email": "a@b.com"}),
    ("revoke_access", {"item_id": "fld_nope", "email": "a@b.com"}),
    ("trash_item", {"item_id": "fld_nope"}),
    ("restore_item", {"item_id": "fld_nope"}),
    ("delete_forever", {"item_id": "fld_nope"}),
    ("create_share_link", {"item_id": "fld_nope"}),
  ):
    call_fails(drive, tool, args, 404, "fld_nope")
  call_fails(drive, "no_such_tool", {}, 404, "search_files")
