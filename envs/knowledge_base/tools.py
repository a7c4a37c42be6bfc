"""Knowledge base: a Zendesk Guide-like help center of sections and articles.

Sections group articles ("Billing & refunds", "Hardware & devices", ...). An article has a
title, a body, labels, an author and a status: draft → published → archived (an archived
article can be restored to a draft). Readers vote published articles helpful or not; each
person has one vote per article and can change it. The seeded articles repeat the numbers of
the company's policies (the refund window of the docstore's refund policy, the helpdesk's SLA
targets, the snow rule for on-site workshops), so a task can check one against the other.

Rules a help-center editor expects: publishing needs a body of at least ``MIN_BODY``
characters, and a published article keeps one; archived articles cannot be edited or
published (restore them first); titles are unique within a section (any letter case); only
published articles can be voted on, and a person's vote counts once; section names are unique.
"""

from __future__ import annotations

from datetime import timedelta

from compoworld import Conflict, InvalidArgument, Service, registry, tool
from compoworld.runtime.fields import Email, Limit, Offset, Text
from compoworld.runtime.query import page_of, paginate, text_matches
from envs._world import WorldUser, seeded
from envs.docstore import snippet
from envs.knowledge_base.state import (
  MIN_BODY,
  SECTIONS,
  Article,
  KnowledgeBaseState,
  Section,
  Status,
  Vote,
  _articles,
  _helpful_pct,
  _labels,
)


@registry.register
class KnowledgeBaseService(WorldUser, Service):
  name = "knowledge_base"
  domain = "support"
  description = "Help-center articles in sections: write, publish, archive, search and vote."
  State = KnowledgeBaseState

  @classmethod
  def generate(cls, seed: int, size: int | None) -> KnowledgeBaseState:
    rng, w, state = seeded(cls, seed)
    now = state.now
    ids = {}
    for i, (name, desc) in enumerate(SECTIONS, 1):
      ids[name] = state.new_id("sec")
      state.sections.insert(Section(id=ids[name], name=name, description=desc, position=i))
    writers = [w.people[0], *[p for p in w.people[1:] if p.department == "Support"][:4]]
    fixed, products = _articles(), []
    home = {"Hardware": "Hardware & devices", "Supplies": "Shipping & orders"}
    for p in w.products:
      products.append(
        (
          home.get(p.category, "Getting started"),
          f"{p.name} ({p.sku}): FAQ",
          (p.category.lower(), p.sku.lower()),
          rng.choices(("published", "draft", "archived"), (7, 2, 1))[0],
          f"The {p.name} ({p.sku}) is part of our {p.category.lower()} range, listed at "
          f"{p.unit_price:.2f} {w.currency}. It ships within 3-5 business days and is covered "
          "by the refund policy. See the user manual in the document store for setup details.",
        )
      )
    total = size if size is not None else 30
    notes = [  # larger help centers keep more release notes
      (
        "Product updates",
        f"Release notes 2025.{n}",
        ("release-notes",),
        "published",
        f"Release 2025.{n} improves dashboard load times, fixes {rng.randint(3, 19)} bugs in "
        "exports and adds audit log entries for API key changes.",
      )
      for n in range(1, max(2, total - len(fixed) - len(products)) + 1)
    ]
    rows = fixed + notes[:2] + products + notes[2:]
    for section, title, labels, status, body in rows[:total]:
      if len(body.strip()) < MIN_BODY and status != "draft":
        status = "draft"  # a short generated body could never have been published
      created = now - timedelta(days=rng.randint(20, 600), hours=rng.randint(0, 8))
      updated = created + timedelta(days=rng.randint(0, (now - created).days - 1))
      live = status != "draft"
      state.articles.insert(
        Article(
          id=state.new_id("art"),
          section_id=ids[section],
          title=title,
          body=body,
          status=status,
          author=rng.choice(writers).email,
          labels=labels,
          created_at=created,
          updated_at=updated,
          published_at=updated if live else None,
          helpful=rng.randint(2, 150) if live else 0,
          not_helpful=rng.randint(0, 40) if live else 0,
          views=rng.randint(100, 6000) if live else 0,
        )
      )
    # A few readers' recorded votes, counted on top of the anonymous ones above.
    published = [a for a in state.articles if a.status == "published"]
    for a in rng.sample(published, min(4, len(published))):
      for person in (w.people[0], rng.choice(w.people[1:])):
        vid = f"{a.id}:{person.email}"
        if vid not in state.votes:
          state.votes.insert(
            Vote(
              id=vid,
              article_id=a.id,
              voter=person.email,
              helpful=rng.random() < 0.8,
              created_at=now - timedelta(days=rng.randint(1, 15)),
            )
          )
          kind = "helpful" if state.votes.get(vid).helpful else "not_helpful"
          a = state.articles.update(a.id, **{kind: getattr(a, kind) + 1})
    return state

  # --- helpers -----------------------------------------------------------------------------

  def _check_title(self, section_id: str, title: str, article_id: str | None = None) -> None:
    for a in self.state.articles:
      if a.section_id == section_id and a.id != article_id and a.title.lower() == title.lower():
        raise Conflict(
          f"section '{section_id}' already has an article titled '{a.title}' ({a.id}); "
          "titles are unique within a section"
        )

  def _check_body(self, article_id: str, body: str, action: str) -> None:
    if len(body.strip()) < MIN_BODY:
      raise Conflict(
        f"cannot {action} article '{article_id}': a published article needs a body of at least "
        f"{MIN_BODY} characters (it has {len(body.strip())})"
      )

  def _editable(self, article_id: str) -> Article:
    article = self.state.articles.get(article_id)
    if article.status == "archived":
      raise Conflict(
        f"article '{article_id}' is archived and cannot be changed; restore it to a draft first"
      )
    return article

  def _view(self, a: Article) -> dict:
    return {
      **dict(a),
      "section": self.state.sections.get(a.section_id).name,
      "helpful_pct": _helpful_pct(a),
    }

  # --- reads -------------------------------------------------------------------------------

  @tool(mutates=False, produces=("section.id", "title", "number"))
  def list_sections(self) -> list[dict]:
    """List the help center's sections in order, with their article counts per status."""
    out = []
    for s in sorted(self.state.sections, key=lambda s: (s.position, s.id)):
      mine = [a.status for a in self.state.articles if a.section_id == s.id]
      counts = {st: mine.count(st) for st in ("published", "draft", "archived")}
      out.append({**dict(s), "articles": counts})
    return out

  @tool(
    mutates=False,
    consumes=("section.id",),
    produces=("article.id", "title", "document.text", "status"),
  )
  def search_articles(
    self,
    query: str | None = None,
    section_id: str | None = None,
    status: Status | None = None,
    label: str | None = None,
    limit: Limit = 20,
    offset: Offset = 0,
  ) -> dict:
    """Search articles; with a query, best matches first (title hits count most), each with a
    snippet of its body; without one, most recently updated first.

    Args:
      query: words that must all appear in the title, body or labels.
      section_id: only articles of this section.
      status: only articles in this status (draft, published, archived); default all.
      label: only articles with this label.
      limit: page size (1-100).
      offset: index of the first article to return.
    """
    self.state.sections.check(section_id)
    want = _labels((label,), "label")[0] if label is not None else None
    words = query.lower().split() if query else []
    found = []
    for a in self.state.articles:
      if (
        (section_id is None or a.section_id == section_id)
        and (status is None or a.status == status)
        and (want is None or want in a.labels)
        and text_matches(query, a.title, a.body, " ".join(a.labels))
      ):
        title, body, tags = a.title.lower(), a.body.lower(), " ".join(a.labels)
        score = sum(3 * title.count(w) + 2 * tags.count(w) + body.count(w) for w in words)
        found.append((a, score))
    if words:
      found.sort(key=lambda x: (-x[1], x[0].title.lower(), x[0].id))
    else:
      found.sort(key=lambda x: (x[0].updated_at, x[0].id), reverse=True)
    page = paginate(found, limit, offset)
    items = []
    for a, score in page["items"]:
      flat = " ".join(a.body.split())
      at = min((i for i in (flat.lower().find(w) for w in words) if i >= 0), default=0)
      items.append(
        {
          "id": a.id,
          "title": a.title,
          "section_id": a.section_id,
          "status": a.status,
          "labels": a.labels,
          "updated_at": a.updated_at,
          "score": score,
          "snippet": snippet(flat, at, 160),
        }
      )
    page["items"] = items
    return page

  @tool(
    mutates=False,
    consumes=("article.id",),
    produces=("article.id", "document.text", "title", "person.email", "percentage"),
  )
  def get_article(self, article_id: str) -> dict:
    """Get one article with its body, section name, votes and helpfulness percentage.

    Args:
      article_id: the article's id.
    """
    return self._view(self.state.articles.get(article_id))

  @tool(mutates=False, produces=("article.id", "title", "number", "percentage"))
  def list_popular_articles(
    self, section_id: str | None = None, limit: Limit = 10, offset: Offset = 0
  ) -> dict:
    """List published articles by helpful votes (then views), most helpful first.

    Args:
      section_id: only articles of this section.
      limit: page size (1-100).
      offset: index of the first article to return.
    """
    self.state.sections.check(section_id)
    return page_of(
      self.state.articles,
      eq={"status": "published", "section_id": section_id},
      key=lambda a: (-a.helpful, -a.views, a.id),
      limit=limit,
      offset=offset,
      view=lambda a: {
        "id": a.id,
        "title": a.title,
        "section_id": a.section_id,
        "helpful": a.helpful,
        "not_helpful": a.not_helpful,
        "helpful_pct": _helpful_pct(a),
        "views": a.views,
      },
    )

  # --- writes ------------------------------------------------------------------------------

  @tool(mutates=True, consumes=("title",), produces=("section.id",))
  def create_section(self, name: Text, description: str = "") -> Section:
    """Create a section at the end of the help center.

    Args:
      name: the section name, unique (any letter case).
      description: what the section covers.
    """
    name = name.strip()
    if not name:
      raise InvalidArgument("name: the section name is blank")
    for s in self.state.sections:
      if s.name.lower() == name.lower():
        raise Conflict(f"a section named '{s.name}' already exists ({s.id})")
    last = max((s.position for s in self.state.sections), default=0)
    return self.state.sections.insert(
      Section(id=self.state.new_id("sec"), name=name, description=description, position=last + 1)
    )

  @tool(
    mutates=True,
    consumes=("section.id", "title", "document.text"),
    produces=("article.id",),
  )
  def create_article(
    self, section_id: str, title: Text, body: str = "", labels: list[str] = ()
  ) -> dict:
    """Create a draft article written by you.

    Args:
      section_id: the section to put it in.
      title: the title, unique within the section.
      body: the article text (at least 50 characters before it can be published).
      labels: labels (lower-cased; spaces become hyphens).
    """
    self.state.sections.get(section_id)
    title = title.strip()
    if not title:
      raise InvalidArgument("title: the title is blank")
    self._check_title(section_id, title)
    now = self.state.now
    article = self.state.articles.insert(
      Article(
        id=self.state.new_id("art"),
        section_id=section_id,
        title=title,
        body=body,
        author=self.user,
        labels=_labels(labels),
        created_at=now,
        updated_at=now,
      )
    )
    return self._view(article)

  @tool(mutates=True, consumes=("article.id", "section.id", "title", "document.text"))
  def update_article(
    self,
    article_id: str,
    title: Text | None = None,
    body: str | None = None,
    labels: list[str] | None = None,
    section_id: str | None = None,
  ) -> dict:
    """Edit a draft or published article; only supplied fields change. A published article
    stays published and must keep a body of at least 50 characters.

    Args:
      article_id: the article's id.
      title: new title, unique within the (new) section.
      body: new body (replaces the old one).
      labels: the full new label list.
      section_id: move the article to this section.
    """
    article = self._editable(article_id)
    changes: dict = {}
    if section_id is not None:
      changes["section_id"] = self.state.sections.get(section_id).id
    if title is not None:
      changes["title"] = title.strip()
      if not changes["title"]:
        raise InvalidArgument("title: the title is blank")
    if body is not None:
      changes["body"] = body
    if labels is not None:
      changes["labels"] = _labels(labels)
    if not changes:
      raise InvalidArgument("update_article: supply at least one field to change")
    if "title" in changes or "section_id" in changes:
      new_section = changes.get("section_id", article.section_id)
      self._check_title(new_section, changes.get("title", article.title), article_id)
    if article.status == "published" and body is not None:
      self._check_body(article_id, body, "update")
    return self._view(self.state.articles.update(article_id, updated_at=self.state.now, **changes))

  @tool(mutates=True, consumes=("article.id",))
  def publish_article(self, article_id: str) -> dict:
    """Publish a draft article so readers can see and vote on it.

    Args:
      article_id: the article's id.
    """
    article = self._editable(article_id)
    if article.status == "published":
      raise Conflict(f"article '{article_id}' is already published")
    self._check_body(article_id, article.body, "publish")
    now = self.state.now
    return self._view(
      self.state.articles.update(article_id, status="published", published_at=now, updated_at=now)
    )

  @tool(mutates=True, consumes=("article.id",))
  def archive_article(self, article_id: str) -> dict:
    """Archive an article: it is hidden from readers and can no longer be edited.

    Args:
      article_id: the article's id.
    """
    article = self.state.articles.get(article_id)
    if article.status == "archived":
      raise Conflict(f"article '{article_id}' is already archived")
    return self._view(
      self.state.articles.update(article_id, status="archived", updated_at=self.state.now)
    )

  @tool(mutates=True, consumes=("article.id",))
  def restore_article(self, article_id: str) -> dict:
    """Restore an archived article as a draft (publish it again to show it to readers).

    Args:
      article_id: the article's id.
    """
    article = self.state.articles.get(article_id)
    if article.status != "archived":
      raise Conflict(
        f"article '{article_id}' is {article.status}; only archived articles can be restored"
      )
    return self._view(
      self.state.articles.update(article_id, status="draft", updated_at=self.state.now)
    )

  @tool(mutates=True, consumes=("article.id", "person.email"), produces=("percentage",))
  def vote_article(self, article_id: str, helpful: bool, voter: Email | None = None) -> dict:
    """Vote a published article helpful or not; a person's later vote replaces their earlier
    one.

    Args:
      article_id: the article's id.
      helpful: true for "helpful", false for "not helpful".
      voter: the reader's email (default: you).
    """
    article = self.state.articles.get(article_id)
    if article.status != "published":
      raise Conflict(
        f"article '{article_id}' is {article.status}; only published articles can be voted on"
      )
    who = (voter or self.user).lower()
    vid = f"{article_id}:{who}"
    previous = self.state.votes.find(vid)
    if previous is not None and previous.helpful == helpful:
      kind = "helpful" if helpful else "not helpful"
      raise Conflict(f"{who} already voted article '{article_id}' {kind}")
    counts = {"helpful": article.helpful, "not_helpful": article.not_helpful}
    counts["helpful" if helpful else "not_helpful"] += 1
    if previous is not None:  # a changed vote moves from one counter to the other
      counts["not_helpful" if helpful else "helpful"] -= 1
      self.state.votes.delete(vid)
    self.state.votes.insert(
      Vote(id=vid, article_id=article_id, voter=who, helpful=helpful, created_at=self.state.now)
    )
    return self._view(self.state.articles.update(article_id, **counts))
