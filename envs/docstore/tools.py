"""Docstore: a document store of manuals, policies, contracts and reports read as PDF-like pages.

Each document has a title, a category (manual, policy, contract, report), an owner, tags and
its text split into pages of about ``PAGE_CHARS`` characters (at paragraph, else word,
boundaries). Lines such as "3. Per-diem rates" or "# Setup" are headings: they make the
document's outline. Readers search the full text (hits are pages, ranked by how many query
words they contain), read a page, annotate a page (optionally highlighting a passage of it)
and bookmark pages.

The seeded policies are the company's source of truth that other services' tasks rely on:
travel per diems per city (``PER_DIEM``) and the receipt threshold, the refund window, the
security incident severities, the support SLA targets (the helpdesk's ``SLA_HOURS``) and the
severe weather rules (offices close at ``SNOW_CLOSURE_CM`` of forecast snow; in-person events
move online at ``SNOW_EVENT_ONLINE_CM``). Rules a document-store user expects: a page outside a
document's range does not exist (the error names the range), a highlight must be text on that
page, only an annotation's author can delete it, a tag is added once, a title is unique within
its category, and a page is bookmarked once per person.
"""

from __future__ import annotations

import random
import re
from datetime import datetime, timedelta

from compoworld import Conflict, InvalidArgument, NotFound, Service, registry, tool
from compoworld.runtime.fields import Email, Text
from compoworld.runtime.query import select, text_matches
from envs._world import DEPARTMENTS, WorldUser, seeded
from envs.docstore.state import (
  _WORD,
  STOPWORDS,
  Annotation,
  Bookmark,
  Category,
  DocstoreState,
  Document,
  Page,
  PageNumber,
  _age,
  _contract,
  _manual,
  _policies,
  _prose,
  _report,
  _tag,
  headings,
  snippet,
  split_pages,
)


@registry.register
class DocstoreService(WorldUser, Service):
  name = "docstore"
  domain = "knowledge_search"
  description = "Paged manuals, policies, contracts and reports: search, read, annotate."
  State = DocstoreState

  @classmethod
  def generate(cls, seed: int, size: int | None) -> DocstoreState:
    rng, w, state = seeded(cls, seed)
    found = {p.department: p.email for p in w.people if p.title == f"Head of {p.department}"}
    heads = {d: found.get(d, w.people[1].email) for d in DEPARTMENTS}  # else the CEO owns it
    docs = _policies(w, heads)
    docs += [_manual(p, rng) for p in w.products if p.category == "Hardware"]
    docs.append(_report("Support Quarterly Report Q4 2025", ("support", "quarterly"), rng))
    for c in w.customers:
      docs.append(_contract(c, w, rng, state.now.date() - timedelta(days=rng.randint(30, 330))))
    total = size if size is not None else 20
    for k in range(1, total - len(docs) + 1):  # larger stores: one report per past month
      y, m = divmod(state.now.year * 12 + state.now.month - 1 - k, 12)
      title = f"Monthly Support Report - {datetime(y, m + 1, 1):%B %Y}"
      docs.append(_report(title, ("support", "monthly"), rng))
    for title, category, department, tags, text in docs[:total]:
      created = state.now - timedelta(days=rng.randint(20, 700), hours=rng.randint(0, 9))
      cls._add(state, title, category, heads[department], tags, _prose(text), created)
    cls._generate_notes(state, rng, w)
    return state

  @staticmethod
  def _add(state, title, category, owner, tags, text, created, updated=None) -> Document:
    did = state.new_id("doc")
    pages = split_pages(text)
    for n, body in enumerate(pages, 1):
      state.pages.insert(Page(id=f"{did}/p{n}", document_id=did, number=n, text=body))
    return state.documents.insert(
      Document(
        id=did,
        title=title,
        category=category,
        owner=owner,
        tags=tags,
        page_count=len(pages),
        created_at=created,
        updated_at=updated or created,
      )
    )

  @staticmethod
  def _generate_notes(state: DocstoreState, rng: random.Random, w) -> None:
    me, others = w.people[0].email, [p.email for p in w.people[1:8]]
    docs = sorted(state.documents, key=lambda d: d.id)
    notes = ("Check this with Finance.", "Important for the Q2 review.", "Outdated? Ask the owner.")
    for i in range(min(8, len(docs) * 2)):
      doc = rng.choice(docs)
      page = state.pages.get(f"{doc.id}/p{rng.randint(1, doc.page_count)}")
      words = page.text.split()
      at = rng.randrange(max(1, len(words) - 5))
      state.annotations.insert(
        Annotation(
          id=state.new_id("ann"),
          document_id=doc.id,
          page=page.number,
          author=me if i % 3 == 0 else rng.choice(others),
          text=rng.choice(notes),
          highlight=" ".join(words[at : at + 4]) if i % 2 == 0 else "",
          created_at=state.now - timedelta(days=rng.randint(1, _age(state, doc))),
        )
      )
    for doc in rng.sample(docs, min(3, len(docs))):
      state.bookmarks.insert(
        Bookmark(
          id=state.new_id("bm"),
          document_id=doc.id,
          page=1,
          owner=me,
          label=doc.title,
          created_at=state.now - timedelta(days=rng.randint(1, _age(state, doc))),
        )
      )

  # --- helpers -----------------------------------------------------------------------------

  def _page(self, document_id: str, number: int) -> Page:
    doc = self.state.documents.get(document_id)
    if not 1 <= number <= doc.page_count:
      raise NotFound(
        f"page {number} not found: document '{document_id}' has pages 1-{doc.page_count}"
      )
    return self.state.pages.get(f"{document_id}/p{number}")

  def _describe(self, document_id: str) -> dict:
    doc = self.state.documents.get(document_id)
    outline = [
      {"page": n, "heading": h}
      for n in range(1, doc.page_count + 1)
      for h in headings(self.state.pages.get(f"{document_id}/p{n}").text)
    ]
    notes = sum(1 for a in self.state.annotations if a.document_id == document_id)
    return {**dict(doc), "outline": outline, "annotations": notes}

  # --- reads -------------------------------------------------------------------------------

  @tool(mutates=False, page="document", produces=("document.id", "title", "person.email"))
  def list_documents(
    self,
    query: str | None = None,
    category: Category | None = None,
    tag: str | None = None,
    owner: Email | None = None,
  ) -> list:
    """List documents by title (metadata only; use read_page for the text).

    Args:
      query: words that must all appear in the title or tags.
      category: only this category: manual, policy, contract or report.
      tag: only documents with this tag.
      owner: only documents owned by this email address.
    """
    return select(
      self.state.documents,
      eq={"category": category, "owner": owner and owner.lower()},
      where=lambda d: (
        (tag is None or _tag(tag) in d.tags) and text_matches(query, d.title, " ".join(d.tags))
      ),
      key=lambda d: (d.title.lower(), d.id),
    )

  @tool(
    mutates=False, page="hit", page_size=10, produces=("document.id", "document.text", "number")
  )
  def search_documents(
    self, query: Text, category: Category | None = None, tag: str | None = None
  ) -> list:
    """Full-text search over every page; hits are pages ranked by how many of the query's
    words they contain (then by how often), each with a snippet around its rarest word.

    Args:
      query: the words to look for (common words such as "the" are ignored).
      category: only documents of this category.
      tag: only documents with this tag.
    """
    words = [t for t in _WORD.findall(query.lower()) if t not in STOPWORDS]
    if not words:
      raise InvalidArgument(f"query: {query!r} has no searchable words")
    docs = {
      d.id: d
      for d in self.state.documents
      if (category is None or d.category == category) and (tag is None or _tag(tag) in d.tags)
    }
    # Words match at word starts ("snow" finds "snowfall", "cm" does not find "acme").
    patterns = [re.compile(rf"\b{re.escape(word)}") for word in words]
    hits = []
    for page in self.state.pages:
      doc = docs.get(page.document_id)
      if doc is None:
        continue
      flat = " ".join(page.text.split())
      found = [[m.start() for m in p.finditer(flat.lower())] for p in patterns]
      found = [f for f in found if f]
      if found:
        rarest = min(found, key=len)  # the most specific word anchors the snippet
        rank = (-len(found), -sum(map(len, found)), doc.title, page.number)
        hits.append((rank, doc, page, len(found), snippet(flat, rarest[0])))
    hits.sort(key=lambda h: h[0])
    return [
      {
        "document_id": doc.id,
        "title": doc.title,
        "category": doc.category,
        "page": page.number,
        "words_matched": matched,
        "snippet": text,
      }
      for _, doc, page, matched, text in hits
    ]

  @tool(
    mutates=False,
    consumes=("document.id",),
    produces=("document.id", "title", "person.email", "number"),
  )
  def get_document(self, document_id: str) -> dict:
    """Get a document's metadata and outline: the headings found on each page.

    Args:
      document_id: the document's id.
    """
    return self._describe(document_id)

  @tool(mutates=False, consumes=("document.id",), produces=("document.text",))
  def read_page(self, document_id: str, page: PageNumber = 1) -> dict:
    """Read the text of one page of a document.

    Args:
      document_id: the document's id.
      page: the page number (1 to the document's page_count).
    """
    p = self._page(document_id, page)
    doc = self.state.documents.get(document_id)
    return {
      "document_id": doc.id,
      "title": doc.title,
      "page": p.number,
      "page_count": doc.page_count,
      "text": p.text,
    }

  @tool(
    mutates=False, page="annotation", consumes=("document.id",), produces=("annotation.id", "text")
  )
  def list_annotations(self, document_id: str | None = None, author: Email | None = None) -> list:
    """List annotations in document and page order.

    Args:
      document_id: only annotations of this document.
      author: only annotations written by this email address.
    """
    self.state.documents.check(document_id)
    return select(
      self.state.annotations,
      eq={"document_id": document_id, "author": author and author.lower()},
      key=lambda a: (a.document_id, a.page, a.created_at, a.id),
    )

  @tool(mutates=False, produces=("bookmark.id", "document.id"))
  def list_bookmarks(self) -> list[dict]:
    """List your bookmarks with the titles of their documents, newest first."""
    mine = sorted(
      (b for b in self.state.bookmarks if b.owner == self.user),
      key=lambda b: (b.created_at, b.id),
      reverse=True,
    )
    return [{**dict(b), "title": self.state.documents.get(b.document_id).title} for b in mine]

  # --- writes ------------------------------------------------------------------------------

  @tool(mutates=True, consumes=("document.id", "text"), produces=("annotation.id",))
  def add_annotation(
    self, document_id: str, page: PageNumber, text: Text, highlight: str = ""
  ) -> Annotation:
    """Annotate a page of a document, optionally highlighting a passage of that page.

    Args:
      document_id: the document's id.
      page: the page number.
      text: the note.
      highlight: a passage copied from the page to highlight (matched ignoring case and
        spacing); empty for none.
    """
    p = self._page(document_id, page)
    passage = " ".join(highlight.split())
    if passage and passage.lower() not in " ".join(p.text.split()).lower():
      raise Conflict(
        f"highlight {passage[:60]!r} does not occur on page {page} of '{document_id}'; "
        "copy a passage from that page"
      )
    return self.state.annotations.insert(
      Annotation(
        id=self.state.new_id("ann"),
        document_id=document_id,
        page=page,
        author=self.user,
        text=text,
        highlight=passage,
        created_at=self.state.now,
      )
    )

  @tool(mutates=True, consumes=("annotation.id",))
  def delete_annotation(self, annotation_id: str) -> dict:
    """Delete one of your annotations.

    Args:
      annotation_id: the annotation's id.
    """
    note = self.state.annotations.get(annotation_id)
    if note.author != self.user:
      raise Conflict(
        f"annotation '{annotation_id}' was written by {note.author}; you can only delete your own"
      )
    self.state.annotations.delete(annotation_id)
    return {"deleted": annotation_id}

  @tool(mutates=True, consumes=("document.id",))
  def add_tag(self, document_id: str, tag: Text) -> Document:
    """Add a tag to a document (lower-cased; spaces become hyphens).

    Args:
      document_id: the document's id.
      tag: the tag.
    """
    doc = self.state.documents.get(document_id)
    value = _tag(tag)
    if not value:
      raise InvalidArgument("tag: give a non-blank tag")
    if value in doc.tags:
      raise Conflict(f"document '{document_id}' is already tagged '{value}'")
    return self.state.documents.update(
      document_id, tags=(*doc.tags, value), updated_at=self.state.now
    )

  @tool(mutates=True, consumes=("title", "document.text"), produces=("document.id",))
  def upload_document(
    self, title: Text, category: Category, text: Text, tags: list[str] = ()
  ) -> dict:
    """Upload a document you own; its text is split into pages of about 1200 characters
    (blank lines separate paragraphs; lines like "2. Scope" or "# Scope" are headings).

    Args:
      title: the title, unique within its category.
      category: manual, policy, contract or report.
      text: the full text.
      tags: tags to set (lower-cased; spaces become hyphens).
    """
    title = title.strip()
    if not title:
      raise InvalidArgument("title: the title is blank")
    clash = next(
      (
        d
        for d in self.state.documents
        if d.category == category and d.title.lower() == title.lower()
      ),
      None,
    )
    if clash is not None:
      raise Conflict(f"a {category} titled '{clash.title}' already exists ({clash.id})")
    if not text.strip():
      raise InvalidArgument("text: the document is blank")
    clean = tuple(dict.fromkeys(v for v in map(_tag, tags) if v))
    doc = self._add(self.state, title, category, self.user, clean, text, self.state.now)
    return self._describe(doc.id)

  @tool(mutates=True, consumes=("document.id",), produces=("bookmark.id",))
  def bookmark_page(self, document_id: str, page: PageNumber, label: str = "") -> Bookmark:
    """Bookmark a page of a document for yourself.

    Args:
      document_id: the document's id.
      page: the page number.
      label: a short label (default: the document title and page).
    """
    self._page(document_id, page)
    if any(
      b.document_id == document_id and b.page == page and b.owner == self.user
      for b in self.state.bookmarks
    ):
      raise Conflict(f"page {page} of '{document_id}' is already bookmarked")
    title = self.state.documents.get(document_id).title
    return self.state.bookmarks.insert(
      Bookmark(
        id=self.state.new_id("bm"),
        document_id=document_id,
        page=page,
        owner=self.user,
        label=label or f"{title}, page {page}",
        created_at=self.state.now,
      )
    )
