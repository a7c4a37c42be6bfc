"""Knowledge base facets: articles as sources of authors, titles and workarounds; drafts, edits
and votes as sinks; the finish-and-publish revisit (the draft status a first read saw is stale)."""

from __future__ import annotations

from datetime import timedelta

from compoworld.tasks.authoring import AuthorContext
from compoworld.tasks.facets import Found, Value, facets
from compoworld.tasks.rubric import exists, record_is, where
from envs._facets_common import colleague, found_one, iso, mentions, moved_to, since, topic
from envs._world import world

S = "knowledge_base"

WORKAROUNDS = (
  "Sign out of the {code} workspace, clear the browser cache and sign in again",
  "Restart the {code} gateway and run the nightly sync by hand",
  "Switch the {code} dashboards to the backup region until the fix ships",
  "Export the {code} reports in two smaller date ranges instead of one",
  "Re-pair the {code} devices from the admin console after the update",
)
#: Sections a how-to article can live in (release notes excluded).
SECTIONS = (
  "Getting started",
  "Account & security",
  "Billing & refunds",
  "Hardware & devices",
  "Shipping & orders",
  "Integrations & API",
)


def _section(ctx: AuthorContext, name: str | None = None) -> dict:
  """A section, found the way an agent would: by listing them."""
  pick = name or ctx.choice(SECTIONS)
  return next(s for s in ctx.call(S, "list_sections") if s["name"] == pick)


def _put_article(
  ctx: AuthorContext,
  title: str,
  body: str,
  status: str = "published",
  section: str | None = None,
  author: str | None = None,
  helpful: int | None = None,
  label: str = "",
) -> dict:
  """Adds one of the scenario's articles, written some weeks before s0."""
  state = ctx.state(S)
  name = section or ctx.choice(SECTIONS)
  sec = next(s for s in state.sections if s.name == name)
  created = state.now - timedelta(days=ctx.rng.randint(10, 60), hours=ctx.rng.randint(1, 8))
  updated = created + timedelta(days=ctx.rng.randint(1, 9))
  live = status == "published"
  return ctx.put(
    S,
    "articles",
    {
      "id": ctx.fresh_id("art"),
      "section_id": sec.id,
      "title": title,
      "body": body,
      "status": status,
      "author": author or colleague(ctx).email,
      "labels": [label] if label else [],
      "created_at": iso(created),
      "updated_at": iso(updated),
      "published_at": iso(updated) if live else None,
      "helpful": (helpful if helpful is not None else ctx.rng.randint(3, 60)) if live else 0,
      "not_helpful": ctx.rng.randint(0, 9) if live else 0,
      "views": ctx.rng.randint(80, 900) if live else 0,
    },
  )


def _code(subject: str) -> str:
  """The topic's codename as a label: "juniper"."""
  return subject.split()[0].lower()


def _find(ctx: AuthorContext, article: dict) -> dict:
  """Search by title, then open the article."""
  hits = ctx.call(S, "search_articles", query=article["title"])["items"]
  hit = next(a for a in hits if a["title"] == article["title"])
  return ctx.call(S, "get_article", article_id=hit["id"])


def _guide(ctx: AuthorContext, status: str = "published") -> dict:
  subject = topic(ctx)
  kind = ctx.choice(("FAQ", "setup guide", "checklist"))
  body = (
    f"This {kind} covers the {subject} for customer admins: who to contact, what changes for "
    "your team and where to find the details."
  )
  return _find(ctx, _put_article(ctx, f"{subject} {kind}", body, status, label=_code(subject)))


# --- sources -------------------------------------------------------------------------------


@facets.source(S, "person.email")
def article_author(ctx: AuthorContext) -> Found:
  article = _guide(ctx)
  return found_one(
    "person.email",
    f'the email address of the author of the "{article["title"]}" help-center article',
    article["author"],
  )


@facets.source(S, "title")
def most_helpful_title(ctx: AuthorContext) -> Found:
  """The scenario's article leads its section's helpful votes by a clear margin."""
  used = ctx.scratch.setdefault("kb_top_sections", set())  # one leader per section and task
  state, name = ctx.state(S), ctx.choice([s for s in SECTIONS if s not in used])
  used.add(name)
  sec = next(s for s in state.sections if s.name == name)
  best = max(
    (a.helpful for a in state.articles if a.section_id == sec.id and a.status == "published"),
    default=0,
  )
  subject = topic(ctx)
  _put_article(
    ctx,
    f"{subject} FAQ",
    f"Answers to the questions customers ask most about the {subject}, kept up to date by the "
    "support team.",
    section=name,
    helpful=best + ctx.rng.randint(5, 40),
    label=_code(subject),
  )
  section = _section(ctx, name)
  top = ctx.call(S, "list_popular_articles", section_id=section["id"], limit=1)["items"][0]
  return found_one(
    "title",
    f'the title of the article with the most helpful votes in the "{name}" section of the help '
    "center",
    top["title"],
  )


@facets.source(S, "text")
def known_issue_workaround(ctx: AuthorContext) -> Found:
  subject = topic(ctx)
  step = ctx.choice(WORKAROUNDS).format(code=subject.split()[0])
  title = f"Known issues: {subject}"
  body = (
    f"Some customers see errors during the {subject}. Our engineers are on it.\n\n"
    f"Workaround: {step}.\n\nWe will update this article when the fix is released."
  )
  article = _find(ctx, _put_article(ctx, title, body, label=_code(subject)))
  line = next(x for x in article["body"].splitlines() if x.startswith("Workaround:"))
  text = line.removeprefix("Workaround:").strip().rstrip(".")
  return found_one(
    "text",
    f'the workaround given in the "{article["title"]}" help-center article (the sentence after '
    '"Workaround:", without the final period)',
    text,
  )


# --- lookups -------------------------------------------------------------------------------


def _faq(ctx: AuthorContext, sku: str) -> dict | None:
  """The product's FAQ article; a catalogue product the help center lacks one for gets it."""
  product = next((p for p in world(ctx.env.seed).products if p.sku == str(sku)), None)
  if product is None:
    return None
  title = f"{product.name} ({product.sku}): FAQ"
  if not any(a.title == title for a in ctx.state(S).articles):
    home = {"Hardware": "Hardware & devices", "Supplies": "Shipping & orders"}
    _put_article(
      ctx,
      title,
      f"The {product.name} ({product.sku}) is part of our {product.category.lower()} range. It "
      "ships within 3-5 business days and is covered by the refund policy.",
      section=home.get(product.category, "Getting started"),
      label=product.sku.lower(),
    )
  hits = ctx.call(S, "search_articles", query=product.sku)["items"]
  hit = next(a for a in hits if a["title"] == title)
  return ctx.call(S, "get_article", article_id=hit["id"])


@facets.lookup(S, "sku", "title")
def faq_title(ctx: AuthorContext, found: Found) -> Found | None:
  article = _faq(ctx, found.values[0].value)
  if article is None:
    return None
  return found_one(
    "title", "the title of the help-center FAQ article for that product", article["title"]
  )


@facets.lookup(S, "sku", "person.email")
def faq_author(ctx: AuthorContext, found: Found) -> Found | None:
  article = _faq(ctx, found.values[0].value)
  if article is None:
    return None
  return found_one(
    "person.email",
    "the email address of whoever wrote the help-center FAQ article for that product",
    article["author"],
  )


# --- sinks ---------------------------------------------------------------------------------


def _new_draft_target(ctx: AuthorContext) -> dict:
  return _section(ctx)


facets.sink(
  S,
  "title",
  "start_draft",
  prepare=_new_draft_target,
  act=lambda ctx, sec, v: ctx.call(
    S,
    "create_article",
    section_id=sec["id"],
    title=str(v.value),
    body=f"Draft: {v.value}. Details to follow.",
  ),
  check=lambda ctx, sec, v: exists(
    S,
    "articles",
    where("section_id", sec["id"]),
    where("title", str(v.value)),
    where("status", "draft"),
    since(ctx, S, "created_at"),
  ),
  phrase=lambda ctx, sec, obj: (
    f'start a draft help-center article in the "{sec["name"]}" section with {obj} as its title'
  ),
  text=lambda ctx, sec, v: f'A draft titled "{v.label}" is in "{sec["name"]}".',
)


def _append(ctx: AuthorContext, article: dict, v: Value) -> None:
  body = ctx.call(S, "get_article", article_id=article["id"])["body"]
  ctx.call(S, "update_article", article_id=article["id"], body=f"{body}\n\n{v.value}")


for kind in ("text", "url"):
  facets.sink(
    S,
    kind,
    f"append_{kind}",
    prepare=_guide,
    act=_append,
    check=lambda ctx, a, v: record_is(S, "articles", a["id"], "body", str(v.value), "icontains"),
    phrase=lambda ctx, a, obj: f'add {obj} at the end of the "{a["title"]}" help-center article',
    text=lambda ctx, a, v: f'The "{a["title"]}" article now includes {v.label}.',
  )


facets.sink(
  S,
  "person.email",
  "record_helpful_vote",
  prepare=_guide,
  act=lambda ctx, a, v: ctx.call(
    S, "vote_article", article_id=a["id"], helpful=True, voter=str(v.value)
  ),
  check=lambda ctx, a, v: exists(
    S,
    "votes",
    where("article_id", a["id"]),
    where("voter", str(v.value).lower()),
    where("helpful", True),
  ),
  phrase=lambda ctx, a, obj: (
    f'record a "helpful" vote from {obj} on the "{a["title"]}" help-center article'
  ),
  text=lambda ctx, a, v: f'{v.label} voted "{a["title"]}" helpful.',
)


# --- the finish-and-publish revisit --------------------------------------------------------


def _draft_first(ctx: AuthorContext) -> tuple[Found, dict]:
  """A colleague's unfinished draft: too short to publish until the walk's text is added."""
  subject = topic(ctx)
  writer = colleague(ctx)  # never the user: the draft is someone else's
  article = _find(
    ctx,
    _put_article(
      ctx,
      f"What changes with the {subject}",
      f"How the {subject.split()[0]} rollout affects your team.",
      status="draft",
      author=writer.email,
      label=_code(subject),
    ),
  )
  found = found_one(
    "person.email",
    f'the email address of whoever is writing the draft "{article["title"]}" help-center article',
    article["author"],
  )
  return found, article


def _finish(ctx: AuthorContext, article: dict, v: Value) -> None:
  _append(ctx, article, v)
  ctx.call(S, "publish_article", article_id=article["id"])


def _status_second(ctx: AuthorContext, article: dict) -> Found:
  now = ctx.call(S, "get_article", article_id=article["id"])
  return found_one(
    "status",
    f'the status of the "{article["title"]}" article now',
    now["status"],
    stale=article["status"],
    answer=f'The "{article["title"]}" article is now {now["status"]}.',
  )


for kind in ("text", "url"):
  facets.revisit(
    S,
    kind="person.email",
    kind_in=kind,
    kind_after="status",
    name=f"finish_and_publish_{kind}",
    first=_draft_first,
    second=_status_second,
    change="finish_and_publish",
    act=_finish,
    check=lambda ctx, a, v: moved_to(S, "articles", a["id"], "published", mentions("body", v)),
    phrase=lambda ctx, a, obj: f"add {obj} at the end of that draft and publish it",
    text=lambda ctx, a, v: f'"{a["title"]}" is published and includes {v.label}.',
    single=True,
  )
