"""Drive: a Google Drive-like file store of folders, files, permissions and share links.

The drive is the home company's shared tree under one root folder, "My Drive", owned by the user
(the world's first person). Folders nest through ``parent_id``; files hold text content (a PDF
holds its extracted text) with a MIME type, a size in bytes, an owner and a parent folder. Every
member of the workspace can browse and read the tree; changing an item needs a role on it.

Roles: the owner of an item; an "editor", "commenter" or "viewer" granted by a permission on the
item or on any folder above it (a folder's permissions are inherited by everything inside it);
the owner of a folder other than the root is an editor of everything inside it. A share link
lets anyone with its URL open the item.

Rules a Drive user expects: only an owner or editor renames, moves, edits, shares, trashes or
restores an item, and creates things inside a folder; only the owner deletes forever, and only
from the trash; nothing in the trash (directly or inside a trashed folder) can be changed until
it is restored, and an item cannot be restored while its folder is in the trash; a folder cannot
move into itself or one of its own subfolders; the root cannot be renamed, moved or trashed;
sharing with someone who already has that role, or with the owner, is refused, and inherited
access is revoked on the folder it comes from; an item has at most one share link.
"""

from __future__ import annotations

from datetime import datetime

from compoworld import Conflict, InvalidArgument, NotFound, Service, Table, registry, tool
from compoworld.runtime.fields import Email, Limit, Offset
from compoworld.runtime.query import page_of, paginate, text_matches
from envs._world import WorldUser
from envs.drive.data import DriveData
from envs.drive.state import (
  DOC,
  RANK,
  DriveState,
  File,
  Folder,
  ItemName,
  MimeType,
  Permission,
  Role,
  ShareLink,
  _link_url,
)


@registry.register
class DriveService(DriveData, WorldUser, Service):
  name = "drive"
  domain = "productivity"
  description = "Folders and files: browse, search, read, create, move, share and trash them."
  State = DriveState

  # --- helpers -----------------------------------------------------------------------------

  def _item(self, item_id: str) -> Folder | File:
    item = self.state.folders.find(item_id) or self.state.files.find(item_id)
    if item is None:
      raise NotFound(f"item '{item_id}' not found (no file or folder has this id)")
    return item

  def _ancestors(self, item: Folder | File) -> list[Folder]:
    """The folders above ``item``, its parent first and the root last."""
    out, parent = [], item.parent_id
    while parent is not None:
      folder = self.state.folders.get(parent)
      out.append(folder)
      parent = folder.parent_id
    return out

  def _path(self, item: Folder | File) -> str:
    return "/".join([f.name for f in reversed(self._ancestors(item))] + [item.name])

  def _trashed_by(self, item: Folder | File) -> Folder | File | None:
    """The item itself or the folder above it whose trashing put it in the trash, if any."""
    return next((x for x in (item, *self._ancestors(item)) if x.trashed), None)

  def _role(self, item: Folder | File) -> str | None:
    if item.owner == self.user:
      return "owner"
    above = self._ancestors(item)
    # Owning a folder makes one an editor of what others put in it; the root is the shared top
    # level of the workspace, so owning it gives no such right.
    roles = ["editor"] if any(f.owner == self.user for f in above[:-1]) else []
    scope = {item.id, *(f.id for f in above)}
    roles += [
      p.role for p in self.state.permissions if p.grantee == self.user and p.item_id in scope
    ]
    return max(roles, key=RANK.__getitem__, default=None)

  def _changeable(self, item_id: str, action: str) -> Folder | File:
    """The item, if the user may ``action`` it: not in the trash, and owner or editor."""
    item = self._item(item_id)
    culprit = self._trashed_by(item)
    if culprit is not None:
      where = "" if culprit is item else f" inside trashed folder '{culprit.name}' ({culprit.id})"
      raise Conflict(f"'{item.name}' ({item_id}) is in the trash{where}; restore it first")
    self._require_editor(item, action)
    return item

  def _require_editor(self, item: Folder | File, action: str) -> None:
    role = self._role(item)
    if role not in ("owner", "editor"):
      has = f"only {role} access" if role else "no access"
      raise Conflict(
        f"you have {has} to '{item.name}' ({item.id}); only its owner {item.owner} or an "
        f"editor can {action}"
      )

  def _table(self, item: Folder | File) -> Table:
    return self.state.folders if isinstance(item, Folder) else self.state.files

  def _summary(self, item: Folder | File) -> dict:
    data = item.model_dump(exclude={"content"})
    data["kind"] = "folder" if isinstance(item, Folder) else "file"
    return data

  def _subtree(self, folder_id: str) -> tuple[set[str], list[File]]:
    """Ids of a folder and every folder below it, and the files anywhere below it."""
    found, frontier = {folder_id}, [folder_id]
    while frontier:
      parent = frontier.pop()
      for f in self.state.folders.filter(lambda f, p=parent: f.parent_id == p):
        found.add(f.id)
        frontier.append(f.id)
    return found, self.state.files.filter(lambda f: f.parent_id in found)

  # --- reads -------------------------------------------------------------------------------

  @tool(mutates=False, consumes=("folder.id",), produces=("folder.id", "file.id", "title"))
  def list_folder(
    self,
    folder_id: str | None = None,
    include_trashed: bool = False,
    limit: Limit = 20,
    offset: Offset = 0,
  ) -> dict:
    """List what is directly inside a folder: subfolders first, then files, each by name.

    Args:
      folder_id: the folder to list; the root "My Drive" when omitted.
      include_trashed: also list items that were moved to the trash.
      limit: page size (1-100).
      offset: index of the first item to return.
    """
    if folder_id is None:
      folder = next(f for f in self.state.folders if f.parent_id is None)
    else:
      folder = self.state.folders.get(folder_id)
    keep = lambda x: x.parent_id == folder.id and (include_trashed or not x.trashed)  # noqa: E731
    items = sorted(self.state.folders.filter(keep), key=lambda f: (f.name.lower(), f.id))
    items += sorted(self.state.files.filter(keep), key=lambda f: (f.name.lower(), f.id))
    page = paginate([self._summary(x) for x in items], limit, offset)
    return {"folder": {"id": folder.id, "path": self._path(folder)}, **page}

  @tool(mutates=False, produces=("file.id", "title", "person.email", "datetime"))
  def search_files(
    self,
    query: str | None = None,
    name: str | None = None,
    mime_type: MimeType | None = None,
    owner: Email | None = None,
    folder_id: str | None = None,
    starred_only: bool = False,
    include_trashed: bool = False,
    modified_after: datetime | None = None,
    modified_before: datetime | None = None,
    limit: Limit = 20,
    offset: Offset = 0,
  ) -> dict:
    """Search files, most recently modified first (results carry no content).

    Args:
      query: words that must all appear in the file's name or content.
      name: words that must all appear in the file's name.
      mime_type: only files of this type.
      owner: only files owned by this email address.
      folder_id: only files somewhere inside this folder.
      starred_only: only starred files.
      include_trashed: also search files in the trash.
      modified_after: only files modified at or after this time (ISO 8601).
      modified_before: only files modified before this time (ISO 8601).
      limit: page size (1-100).
      offset: index of the first file to return.
    """
    if modified_after and modified_before and modified_before <= modified_after:
      raise InvalidArgument("modified_before must be after modified_after")
    inside = None
    if folder_id is not None:
      inside = self._subtree(self.state.folders.get(folder_id).id)[0]
    return page_of(
      self.state.files,
      eq={"mime_type": mime_type, "owner": owner and owner.lower()},
      ge={"updated_at": modified_after},
      lt={"updated_at": modified_before},
      text=query,
      fields=("name", "content"),
      where=lambda f: (
        (inside is None or f.parent_id in inside)
        and (not starred_only or f.starred)
        and text_matches(name, f.name)
        and (include_trashed or self._trashed_by(f) is None)
      ),
      key=lambda f: (f.updated_at, f.id),
      reverse=True,
      limit=limit,
      offset=offset,
      view=self._summary,
    )

  @tool(
    mutates=False,
    consumes=("file.id",),
    produces=("file.id", "folder.id", "person.email", "datetime", "url", "title"),
  )
  def get_file(self, file_id: str) -> dict:
    """Get a file's details: path, owner, size, your role, who it is shared with and its share
    link (use read_file_content for the text).

    Args:
      file_id: the file's id.
    """
    f = self.state.files.get(file_id)
    link = next((x.url for x in self.state.links if x.item_id == file_id), None)
    shared = [
      {"email": p.grantee, "role": p.role} for p in self.state.permissions if p.item_id == file_id
    ]
    trashed = self._trashed_by(f) is not None
    extra = {"path": self._path(f), "your_role": self._role(f), "in_trash": trashed}
    return {**self._summary(f), **extra, "shared_with": shared, "link": link}

  @tool(mutates=False, consumes=("file.id",), produces=("document.text", "title"))
  def read_file_content(self, file_id: str) -> dict:
    """Read a file's text content (for a PDF, its extracted text).

    Args:
      file_id: the file's id.
    """
    f = self.state.files.get(file_id)
    return {"id": f.id, "name": f.name, "mime_type": f.mime_type, "content": f.content}

  @tool(mutates=False, consumes=("file.id", "folder.id"), produces=("person.email",))
  def list_permissions(self, item_id: str) -> list[dict]:
    """List everyone with access to a file or folder: the owner, direct grants and grants
    inherited from the folders above it (with the folder they come from).

    Args:
      item_id: the file or folder id.
    """
    item = self._item(item_id)
    out = [{"email": item.owner, "role": "owner", "inherited_from": None}]
    for holder in (item, *self._ancestors(item)):
      for p in self.state.permissions.filter(lambda p, h=holder: p.item_id == h.id):
        origin = None if holder is item else holder.id
        out.append({"email": p.grantee, "role": p.role, "inherited_from": origin})
    return out

  # --- writes ------------------------------------------------------------------------------

  def _parent(self, parent_id: str | None) -> Folder:
    if parent_id is None:
      return next(f for f in self.state.folders if f.parent_id is None)
    folder = self.state.folders.get(parent_id)
    self._changeable(folder.id, f"add items to folder '{folder.name}'")
    return folder

  @tool(mutates=True, consumes=("folder.id", "title"), produces=("folder.id",))
  def create_folder(self, name: ItemName, parent_id: str | None = None) -> Folder:
    """Create a folder owned by you.

    Args:
      name: the folder name.
      parent_id: the folder to create it in; the root "My Drive" when omitted.
    """
    parent = self._parent(parent_id)
    return self.state.folders.insert(
      Folder(
        id=self.state.new_id("fld"),
        name=name,
        parent_id=parent.id,
        owner=self.user,
        created_at=self.state.now,
        updated_at=self.state.now,
      )
    )

  @tool(mutates=True, consumes=("folder.id", "title", "document.text"), produces=("file.id",))
  def create_file(
    self, name: ItemName, content: str, parent_id: str | None = None, mime_type: MimeType = DOC
  ) -> File:
    """Create a file owned by you; its size is that of its content.

    Args:
      name: the file name.
      content: the file's text content.
      parent_id: the folder to create it in; the root "My Drive" when omitted.
      mime_type: the file type; a Docs document by default.
    """
    parent = self._parent(parent_id)
    return self.state.files.insert(
      File(
        id=self.state.new_id("file"),
        name=name,
        mime_type=mime_type,
        content=content,
        size_bytes=len(content.encode()),
        owner=self.user,
        parent_id=parent.id,
        created_at=self.state.now,
        updated_at=self.state.now,
      )
    )

  @tool(mutates=True, consumes=("file.id", "document.text"))
  def update_file_content(self, file_id: str, content: str) -> File:
    """Replace a file's content (owner or editor only).

    Args:
      file_id: the file's id.
      content: the new full content.
    """
    self.state.files.get(file_id)
    self._changeable(file_id, "edit it")
    return self.state.files.update(
      file_id, content=content, size_bytes=len(content.encode()), updated_at=self.state.now
    )

  @tool(mutates=True, consumes=("file.id", "folder.id", "title"))
  def rename_item(self, item_id: str, name: ItemName) -> dict:
    """Rename a file or folder (owner or editor only; the root cannot be renamed).

    Args:
      item_id: the file or folder id.
      name: the new name.
    """
    item = self._changeable(item_id, "rename it")
    if item.parent_id is None:
      raise Conflict("the root folder 'My Drive' cannot be renamed")
    if item.name == name:
      raise Conflict(f"'{item_id}' is already named '{name}'")
    return self._summary(self._table(item).update(item_id, name=name, updated_at=self.state.now))

  @tool(mutates=True, consumes=("file.id", "folder.id"))
  def move_item(self, item_id: str, folder_id: str) -> dict:
    """Move a file or folder into another folder; you need owner or editor access to both.

    Args:
      item_id: the file or folder to move.
      folder_id: the destination folder.
    """
    item = self._item(item_id)
    dest = self.state.folders.get(folder_id)
    if item.parent_id is None:
      raise Conflict("the root folder 'My Drive' cannot be moved")
    self._changeable(item_id, "move it")
    if isinstance(item, Folder) and folder_id in self._subtree(item.id)[0]:
      raise Conflict(
        f"cannot move folder '{item.name}' into itself or one of its subfolders "
        f"('{dest.name}'); choose a folder outside it"
      )
    if item.parent_id == folder_id:
      raise Conflict(f"'{item.name}' is already in folder '{dest.name}'")
    self._changeable(folder_id, f"add items to folder '{dest.name}'")
    moved = self._table(item).update(item_id, parent_id=folder_id, updated_at=self.state.now)
    return {**self._summary(moved), "path": self._path(moved)}

  @tool(mutates=True, consumes=("file.id", "folder.id"))
  def star_item(self, item_id: str, starred: bool = True) -> dict:
    """Star or unstar a file or folder.

    Args:
      item_id: the file or folder id.
      starred: true to star, false to remove the star.
    """
    item = self._item(item_id)
    if item.starred == starred:
      raise Conflict(f"'{item.name}' is already {'starred' if starred else 'not starred'}")
    return self._summary(self._table(item).update(item_id, starred=starred))

  @tool(mutates=True, consumes=("file.id", "folder.id", "person.email"))
  def share_item(self, item_id: str, email: Email, role: Role = "viewer") -> Permission:
    """Share a file or folder with someone, or change the role they already have (owner or
    editor only). Sharing a folder shares everything inside it.

    Args:
      item_id: the file or folder id.
      email: the person's email address.
      role: "viewer", "commenter" or "editor".
    """
    item = self._changeable(item_id, "share it")
    email = email.lower()
    if email == item.owner:
      raise Conflict(f"{email} owns '{item.name}' and already has full access")
    current = next(
      (p for p in self.state.permissions if p.item_id == item_id and p.grantee == email), None
    )
    if current is not None and current.role == role:
      raise Conflict(f"'{item.name}' is already shared with {email} as {role}")
    if current is not None:
      return self.state.permissions.update(
        current.id, role=role, granted_by=self.user, granted_at=self.state.now
      )
    return self.state.permissions.insert(
      Permission(
        id=self.state.new_id("perm"),
        item_id=item_id,
        grantee=email,
        role=role,
        granted_by=self.user,
        granted_at=self.state.now,
      )
    )

  @tool(mutates=True, consumes=("file.id", "folder.id", "person.email"))
  def revoke_access(self, item_id: str, email: Email) -> Permission:
    """Remove someone's direct access to a file or folder (owner or editor only).

    Args:
      item_id: the file or folder id.
      email: the person whose access to remove.
    """
    item = self._item(item_id)
    self._require_editor(item, "change who has access")
    email = email.lower()
    if email == item.owner:
      raise Conflict(f"{email} owns '{item.name}'; an owner's access cannot be revoked")
    direct = next(
      (p for p in self.state.permissions if p.item_id == item_id and p.grantee == email), None
    )
    if direct is None:
      above = {f.id: f for f in self._ancestors(item)}
      via = next(
        (p for p in self.state.permissions if p.item_id in above and p.grantee == email), None
      )
      if via is not None:
        raise Conflict(
          f"{email}'s access to '{item.name}' is inherited from folder "
          f"'{above[via.item_id].name}' ({via.item_id}); revoke it there"
        )
      raise NotFound(f"{email} has no access to item '{item_id}'")
    return self.state.permissions.delete(direct.id)

  @tool(mutates=True, consumes=("file.id", "folder.id"))
  def trash_item(self, item_id: str) -> dict:
    """Move a file or folder (with everything inside it) to the trash (owner or editor only).

    Args:
      item_id: the file or folder id.
    """
    item = self._item(item_id)
    if item.parent_id is None:
      raise Conflict("the root folder 'My Drive' cannot be trashed")
    self._changeable(item_id, "trash it")
    return self._summary(self._table(item).update(item_id, trashed=True, updated_at=self.state.now))

  @tool(mutates=True, consumes=("file.id", "folder.id"))
  def restore_item(self, item_id: str) -> dict:
    """Restore a trashed file or folder to where it was (owner or editor only).

    Args:
      item_id: the file or folder id.
    """
    item = self._item(item_id)
    if not item.trashed:
      culprit = self._trashed_by(item)
      hint = (
        f"; it is inside trashed folder '{culprit.name}' ({culprit.id}), restore that"
        if (culprit)
        else ""
      )
      raise Conflict(f"'{item.name}' ({item_id}) is not in the trash itself{hint}")
    parent_culprit = self._trashed_by(self.state.folders.get(item.parent_id))
    if parent_culprit is not None:
      raise Conflict(
        f"cannot restore '{item.name}': folder '{parent_culprit.name}' ({parent_culprit.id}) "
        "above it is in the trash; restore that folder first"
      )
    self._require_editor(item, "restore it")
    restored = self._table(item).update(item_id, trashed=False, updated_at=self.state.now)
    return self._summary(restored)

  @tool(mutates=True, consumes=("file.id", "folder.id"))
  def delete_forever(self, item_id: str) -> dict:
    """Permanently delete a trashed item, everything inside it, its permissions and share
    links (owner only; it must be in the trash first).

    Args:
      item_id: the file or folder id.
    """
    item = self._item(item_id)
    if not item.trashed:
      raise Conflict(f"'{item.name}' ({item_id}) is not in the trash; trash it first")
    if item.owner != self.user:
      raise Conflict(f"only the owner {item.owner} can delete '{item.name}' forever")
    if isinstance(item, Folder):
      folders, files = self._subtree(item_id)
    else:
      folders, files = set(), [item]
    gone = folders | {f.id for f in files}
    for fid in folders:
      self.state.folders.delete(fid)
    for f in files:
      self.state.files.delete(f.id)
    for p in self.state.permissions.filter(lambda p: p.item_id in gone):
      self.state.permissions.delete(p.id)
    for x in self.state.links.filter(lambda x: x.item_id in gone):
      self.state.links.delete(x.id)
    return {"deleted": sorted(gone)}

  @tool(mutates=True, consumes=("file.id", "folder.id"), produces=("url",))
  def create_share_link(self, item_id: str) -> ShareLink:
    """Create a link that lets anyone who has it open the file or folder (owner or editor).

    Args:
      item_id: the file or folder id.
    """
    item = self._changeable(item_id, "create a share link")
    existing = self.state.links.find_by(item_id=item_id)
    if existing is not None:
      raise Conflict(f"'{item.name}' already has a share link: {existing.url}")
    return self.state.links.insert(
      ShareLink(
        id=self.state.new_id("link"),
        item_id=item_id,
        url=_link_url(item_id, isinstance(item, Folder)),
        created_by=self.user,
        created_at=self.state.now,
      )
    )
