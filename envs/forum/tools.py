"""Forum: a Reddit-like service of communities, posts, threaded comments and votes.

Communities (``r/...``) hold posts; a post holds comments, each either a top-level reply to the
post (``parent_id`` None) or a reply to another comment of the same post, so threads can be
rebuilt from ``parent_id``. Users are the world's people, keyed by their handle; the current
user (``state.user``, the world's first person) authors every new post and comment. Rules a
forum user expects: a locked post takes no new comments, a deleted comment takes no replies,
edits or votes, only your own comments can be edited or deleted and only your own posts locked,
voting the same way twice is refused while switching direction moves the score by two.
"""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Literal

from compoworld import Conflict, NotFound, Service, registry, tool
from compoworld.runtime.fields import Text
from compoworld.runtime.query import select
from envs._world import world
from envs.forum.state import (
  POSTS,
  REPLIES,
  TOP_COMMENTS,
  Comment,
  Community,
  Direction,
  ForumState,
  Post,
  User,
  Vote,
  _context,
)


@registry.register
class ForumService(Service):
  name = "forum"
  domain = "social_media"
  description = "A Reddit-like forum: communities, posts, threaded comments, votes."
  State = ForumState

  @classmethod
  def generate(cls, seed: int, size: int | None) -> ForumState:
    rng, w = random.Random(f"{cls.name}:{seed}"), world(seed)
    me = w.people[0]
    state = ForumState.empty(seed, user=me.handle)
    for p in w.people:
      state.users.insert(User(id=p.handle, display_name=p.name, email=p.email))
    city, slug = me.city, me.city.lower()
    venues = [v for v in w.venues if v.city == city]
    kinds = {}
    for kind, name, title, desc in (
      (
        "devs",
        f"r/{slug}_devs",
        f"{city} Developers",
        f"Meetups, jobs and talk for people who build software in {city}.",
      ),
      ("city", f"r/{slug}", city, f"News, questions and everyday life in {city}."),
      (
        "projects",
        "r/sideprojects",
        "Side Projects",
        "Show off and get feedback on the things you build after hours.",
      ),
      (
        "makers",
        f"r/{slug}_makers",
        f"{city} Makers",
        "Electronics, woodworking, 3D printing and workshops around town.",
      ),
    ):
      cid = state.new_id("sub")
      state.communities.insert(Community(id=cid, name=name, title=title, description=desc))
      kinds[cid] = kind
    community_ids = list(kinds)
    others = w.people[1:]
    posts: list[Post] = []
    for i in range(size if size is not None else 25):
      cid = rng.choice(community_ids)
      title, body, flair = rng.choice(POSTS[kinds[cid]])
      ctx = _context(rng, city, venues, state.now)
      author = me if i == 0 or rng.random() < 0.12 else rng.choice(others)
      created = state.now - timedelta(minutes=rng.randint(90, 14 * 24 * 60))
      score = rng.randint(-2, 30) + (rng.randint(30, 300) if rng.random() < 0.2 else 0)
      post = Post(
        id=state.new_id("post"),
        community_id=cid,
        author=author.handle,
        title=title.format(**ctx),
        body=body.format(**ctx),
        score=score,
        created_at=created,
        locked=author is not me and rng.random() < 0.08,
        flair=flair if rng.random() < 0.8 else None,
      )
      posts.append(state.posts.insert(post))
      if author is not me and rng.random() < 0.15:
        state.votes.insert(Vote(id=post.id, direction=1))
    n_comments = 80 if size is None else 3 * len(posts)
    per_post = [0] * len(posts)
    for _ in range(n_comments if posts else 0):
      per_post[rng.randrange(len(posts))] += 1
    for post, k in zip(posts, per_post, strict=True):
      span = int((state.now - post.created_at).total_seconds())
      thread: list[Comment] = []
      for offset in sorted(rng.sample(range(60, span), k)):
        parent = rng.choice(thread) if thread and rng.random() < 0.4 else None
        if parent is not None:
          body = rng.choice(REPLIES)
        else:
          body = rng.choice(TOP_COMMENTS[kinds[post.community_id]])
        author = me if rng.random() < 0.1 else rng.choice(others)
        comment = Comment(
          id=state.new_id("cmt"),
          post_id=post.id,
          parent_id=parent.id if parent else None,
          author=author.handle,
          body=body.format(**_context(rng, city, venues, state.now)),
          score=rng.randint(-2, 40),
          created_at=post.created_at + timedelta(seconds=offset),
          deleted=rng.random() < 0.04,
        )
        thread.append(state.comments.insert(comment))
        if author is not me and not comment.deleted and rng.random() < 0.05:
          state.votes.insert(Vote(id=comment.id, direction=rng.choice((1, -1))))
    return state

  # --- helpers -----------------------------------------------------------------------------

  def _open_post(self, post_id: str) -> Post:
    post = self.state.posts.get(post_id)
    if post.locked:
      raise Conflict(f"post '{post_id}' is locked and takes no new comments")
    return post

  def _own_comment(self, comment_id: str) -> Comment:
    comment = self.state.comments.get(comment_id)
    if comment.author != self.state.user:
      raise Conflict(
        f"comment '{comment_id}' was written by '{comment.author}'; "
        f"you ('{self.state.user}') can only change your own comments"
      )
    if comment.deleted:
      raise Conflict(f"comment '{comment_id}' is deleted")
    return comment

  def _comment(self, post_id: str, parent_id: str | None, body: str) -> Comment:
    comment = Comment(
      id=self.state.new_id("cmt"),
      post_id=post_id,
      parent_id=parent_id,
      author=self.state.user,
      body=body,
      created_at=self.state.now,
    )
    return self.state.comments.insert(comment)

  # --- reads -------------------------------------------------------------------------------

  @tool(mutates=False, produces=("community.id",))
  def list_communities(self) -> list[Community]:
    """List the forum's communities with their slug (e.g. "r/toronto_devs") and description."""
    return list(self.state.communities)

  @tool(mutates=False, produces=("person.handle",))
  def get_current_user(self) -> User:
    """Get the signed-in user: their handle authors every new post and comment."""
    return self.state.users.get(self.state.user)

  @tool(
    mutates=False,
    page="post",
    consumes=("community.id", "person.handle", "text"),
    produces=("post.id", "person.handle", "text"),
  )
  def search_posts(
    self,
    query: str | None = None,
    community_id: str | None = None,
    author: str | None = None,
    sort: Literal["new", "top"] = "new",
  ) -> list:
    """Search posts, newest first or highest score first.

    Args:
      query: words that must all appear in the title, body or flair.
      community_id: only posts of this community.
      author: only posts by this user handle.
      sort: "new" (newest first) or "top" (highest score first).
    """
    self.state.communities.check(community_id)
    self.state.users.check(author)
    return select(
      self.state.posts,
      eq={"community_id": community_id, "author": author},
      text=query,
      fields=("title", "body", "flair"),
      key=lambda p: (-p.score if sort == "top" else 0, -p.created_at.timestamp(), p.id),
    )

  @tool(mutates=False, consumes=("post.id",), produces=("post.id", "person.handle", "text"))
  def get_post(self, post_id: str) -> dict:
    """Get one post with its score, lock state and number of (non-deleted) comments.

    Args:
      post_id: the post's id.
    """
    post = self.state.posts.get(post_id)
    count = sum(1 for c in self.state.comments if c.post_id == post_id and not c.deleted)
    return {**post.model_dump(), "comment_count": count}

  @tool(
    mutates=False,
    page="comment",
    page_size=50,
    consumes=("post.id",),
    produces=("comment.id", "person.handle", "text"),
  )
  def list_comments(self, post_id: str) -> list:
    """List a post's comments in time order; ``parent_id`` tells which comment each one
    answers (None: a direct reply to the post). Deleted comments are left out.

    Args:
      post_id: the post's id.
    """
    self.state.posts.get(post_id)
    return sorted(
      (c for c in self.state.comments if c.post_id == post_id and not c.deleted),
      key=lambda c: (c.created_at, c.id),
    )

  @tool(mutates=False, consumes=("person.handle",), produces=("person.name", "person.email"))
  def get_user(self, handle: str) -> User:
    """Get a user's display name and email address from their handle.

    Args:
      handle: the user's handle, e.g. "ava_oka23".
    """
    return self.state.users.get(handle)

  # --- writes ------------------------------------------------------------------------------

  @tool(mutates=True, consumes=("community.id", "text"), produces=("post.id",))
  def create_post(
    self, community_id: str, title: Text, body: Text, flair: str | None = None
  ) -> Post:
    """Create a post in a community as the current user.

    Args:
      community_id: the community to post in.
      title: the post title.
      body: the post text.
      flair: an optional tag such as "Meetup" or "Question".
    """
    self.state.communities.get(community_id)
    post = Post(
      id=self.state.new_id("post"),
      community_id=community_id,
      author=self.state.user,
      title=title,
      body=body,
      created_at=self.state.now,
      flair=flair,
    )
    return self.state.posts.insert(post)

  @tool(mutates=True, consumes=("post.id", "text"), produces=("comment.id",))
  def reply_to_post(self, post_id: str, body: Text) -> Comment:
    """Add a top-level comment to a post; fails if the post is locked.

    Args:
      post_id: the post's id.
      body: the comment text.
    """
    self._open_post(post_id)
    return self._comment(post_id, None, body)

  @tool(mutates=True, consumes=("comment.id", "text"), produces=("comment.id",))
  def reply_to_comment(self, comment_id: str, body: Text) -> Comment:
    """Reply to a comment, in the same post's thread; fails if the comment is deleted or the
    post is locked.

    Args:
      comment_id: the id of the comment to answer.
      body: the reply text.
    """
    parent = self.state.comments.get(comment_id)
    if parent.deleted:
      raise Conflict(f"comment '{comment_id}' is deleted and cannot be replied to")
    self._open_post(parent.post_id)
    return self._comment(parent.post_id, parent.id, body)

  @tool(mutates=True, consumes=("post.id", "comment.id"))
  def vote(self, target_id: str, direction: Direction) -> dict:
    """Upvote (1) or downvote (-1) a post or comment. Switching an earlier vote moves the
    score by two; repeating it is refused.

    Args:
      target_id: the id of a post or a comment.
      direction: 1 to upvote, -1 to downvote.
    """
    target = self.state.posts.find(target_id)
    table = self.state.posts
    if target is None:
      target, table = self.state.comments.find(target_id), self.state.comments
    if target is None:
      raise NotFound(f"no post or comment with id '{target_id}'")
    if isinstance(target, Comment) and target.deleted:
      raise Conflict(f"comment '{target_id}' is deleted and cannot be voted on")
    previous = self.state.votes.find(target_id)
    if previous is not None and previous.direction == direction:
      word = "upvoted" if direction == 1 else "downvoted"
      raise Conflict(f"you already {word} '{target_id}'")
    delta = direction - (previous.direction if previous is not None else 0)
    updated = table.update(target_id, score=target.score + delta)
    if previous is None:
      self.state.votes.insert(Vote(id=target_id, direction=direction))
    else:
      self.state.votes.update(target_id, direction=direction)
    kind = "post" if isinstance(target, Post) else "comment"
    return {"target_id": target_id, "kind": kind, "direction": direction, "score": updated.score}

  @tool(mutates=True, consumes=("comment.id", "text"))
  def edit_comment(self, comment_id: str, body: Text) -> Comment:
    """Replace the text of one of your own comments.

    Args:
      comment_id: the comment's id.
      body: the new text.
    """
    self._own_comment(comment_id)
    return self.state.comments.update(comment_id, body=body)

  @tool(mutates=True, consumes=("comment.id",))
  def delete_comment(self, comment_id: str) -> Comment:
    """Delete one of your own comments; it disappears from the thread, its replies stay.

    Args:
      comment_id: the comment's id.
    """
    self._own_comment(comment_id)
    return self.state.comments.update(comment_id, deleted=True)

  @tool(mutates=True, consumes=("post.id",))
  def lock_post(self, post_id: str) -> Post:
    """Lock one of your own posts so that it takes no new comments.

    Args:
      post_id: the post's id.
    """
    post = self.state.posts.get(post_id)
    if post.author != self.state.user:
      raise Conflict(
        f"post '{post_id}' was written by '{post.author}'; you can only lock your own posts"
      )
    if post.locked:
      raise Conflict(f"post '{post_id}' is already locked")
    return self.state.posts.update(post_id, locked=True)
