import pytest

from envs._world import world
from envs.forum import ForumService
from tests.contract import call_fails, call_ok


@pytest.fixture
def forum():
  return ForumService.create(seed=3)


def me(forum):
  return forum.state.user


def others_comment(forum):
  return next(c for c in forum.state.comments if c.author != me(forum) and not c.deleted)


def own_comment(forum):
  return next(
    c
    for c in forum.state.comments
    if c.author == me(forum) and not c.deleted and not forum.state.posts.get(c.post_id).locked
  )


def open_post(forum, mine=False):
  return next(p for p in forum.state.posts if not p.locked and (p.author == me(forum)) == mine)


def test_seeded_data_is_sized():
  a = ForumService.create(seed=5)
  assert (len(a.state.communities), len(a.state.posts), len(a.state.comments)) == (4, 25, 80)
  big = ForumService.create(seed=5, size=40).state
  assert (len(big.posts), len(big.comments)) == (40, 120)
  person = world(5).people[0]
  assert a.state.user == person.handle and a.state.users.get(person.handle).email == person.email
  assert len(a.state.users) == len(world(5).people)
  for c in a.state.comments:
    post = a.state.posts.get(c.post_id)
    assert c.created_at > post.created_at and c.created_at < a.state.now
    if c.parent_id is not None:
      parent = a.state.comments.get(c.parent_id)
      assert parent.post_id == c.post_id and parent.created_at < c.created_at


def test_reads(forum):
  communities = call_ok(forum, "list_communities")
  assert len(communities) == 4 and all(c["name"].startswith("r/") for c in communities)
  user = call_ok(forum, "get_current_user")
  assert user["id"] == me(forum)
  assert call_ok(forum, "get_user", {"handle": me(forum)}) == user

  page = call_ok(forum, "search_posts", {"limit": 5})
  assert page["total"] == 25 and len(page["items"]) == 5 and page["next_offset"] == 5
  times = [p["created_at"] for p in page["items"]]
  assert times == sorted(times, reverse=True)
  top = call_ok(forum, "search_posts", {"sort": "top", "limit": 100})["items"]
  scores = [p["score"] for p in top]
  assert scores == sorted(scores, reverse=True) and len(top) == 25
  cid = communities[0]["id"]
  in_c = call_ok(forum, "search_posts", {"community_id": cid, "limit": 100})["items"]
  assert in_c and all(p["community_id"] == cid for p in in_c)
  assert len(in_c) == len(forum.state.posts.filter(lambda p: p.community_id == cid))
  mine = call_ok(forum, "search_posts", {"author": me(forum), "limit": 100})["items"]
  assert mine and all(p["author"] == me(forum) for p in mine)
  word = top[0]["title"].split()[0]
  hits = call_ok(forum, "search_posts", {"query": word, "limit": 100})["items"]
  assert top[0]["id"] in [p["id"] for p in hits]

  post = max(forum.state.posts, key=lambda p: sum(c.post_id == p.id for c in forum.state.comments))
  live = [c for c in forum.state.comments if c.post_id == post.id and not c.deleted]
  got = call_ok(forum, "get_post", {"post_id": post.id})
  assert got["title"] == post.title and got["comment_count"] == len(live)
  thread = call_ok(forum, "list_comments", {"post_id": post.id})
  assert thread["total"] == len(live)
  assert [c["id"] for c in thread["items"]] == [
    c.id for c in sorted(live, key=lambda c: (c.created_at, c.id))
  ]
  assert all("parent_id" in c for c in thread["items"])


def test_deleted_comments_are_hidden(forum):
  gone = next(c for c in forum.state.comments if c.deleted)
  thread = call_ok(forum, "list_comments", {"post_id": gone.post_id, "limit": 100})
  assert gone.id not in [c["id"] for c in thread["items"]]


def test_create_post_reply_and_thread(forum):
  cid = call_ok(forum, "list_communities")[0]["id"]
  post = call_ok(
    forum,
    "create_post",
    {"community_id": cid, "title": "Rust meetup", "body": "Who's in?", "flair": "Meetup"},
  )
  assert post["author"] == me(forum) and post["score"] == 0 and not post["locked"]
  assert forum.state.posts.get(post["id"]).flair == "Meetup"
  assert call_ok(forum, "search_posts", {"limit": 1})["items"][0]["id"] == post["id"]
  top = call_ok(forum, "reply_to_post", {"post_id": post["id"], "body": "Me!"})
  assert top["parent_id"] is None and top["post_id"] == post["id"] and top["author"] == me(forum)
  reply = call_ok(forum, "reply_to_comment", {"comment_id": top["id"], "body": "And me."})
  assert reply["parent_id"] == top["id"] and reply["post_id"] == post["id"]
  thread = call_ok(forum, "list_comments", {"post_id": post["id"]})["items"]
  assert [(c["id"], c["parent_id"]) for c in thread] == [
    (top["id"], None),
    (reply["id"], top["id"]),
  ]
  assert call_ok(forum, "get_post", {"post_id": post["id"]})["comment_count"] == 2

  other = others_comment(forum)
  answer = call_ok(forum, "reply_to_comment", {"comment_id": other.id, "body": "Thanks!"})
  assert forum.state.comments.get(answer["id"]).post_id == other.post_id


def test_vote_post_and_comment(forum):
  post = next(p for p in forum.state.posts if p.id not in forum.state.votes)
  up = call_ok(forum, "vote", {"target_id": post.id, "direction": 1})
  assert up == {"target_id": post.id, "kind": "post", "direction": 1, "score": post.score + 1}
  down = call_ok(forum, "vote", {"target_id": post.id, "direction": -1})
  assert down["score"] == post.score - 1
  assert forum.state.posts.get(post.id).score == post.score - 1
  assert forum.state.votes.get(post.id).direction == -1
  comment = next(c for c in forum.state.comments if not c.deleted and c.id not in forum.state.votes)
  res = call_ok(forum, "vote", {"target_id": comment.id, "direction": -1})
  assert (
    res["kind"] == "comment" and forum.state.comments.get(comment.id).score == comment.score - 1
  )


def test_edit_delete_lock_own(forum):
  mine = own_comment(forum)
  edited = call_ok(forum, "edit_comment", {"comment_id": mine.id, "body": "Edited: see above"})
  assert edited["body"] == "Edited: see above"
  assert forum.state.comments.get(mine.id).body == "Edited: see above"
  deleted = call_ok(forum, "delete_comment", {"comment_id": mine.id})
  assert deleted["deleted"] and forum.state.comments.get(mine.id).deleted
  ids = [c["id"] for c in call_ok(forum, "list_comments", {"post_id": mine.post_id})["items"]]
  assert mine.id not in ids
  post = open_post(forum, mine=True)
  assert call_ok(forum, "lock_post", {"post_id": post.id})["locked"]
  assert forum.state.posts.get(post.id).locked


def test_error_paths_are_atomic(forum):
  post, mine_post = open_post(forum), open_post(forum, mine=True)
  other, mine = others_comment(forum), own_comment(forum)
  cid = forum.state.communities.ids()[0]
  # missing, ill-typed and out-of-range arguments
  call_fails(forum, "get_post", {}, 400, "post_id")
  call_fails(forum, "get_post", {"post_id": 7}, 400, "post_id", "string")
  call_fails(forum, "get_user", {}, 400, "handle")
  call_fails(forum, "list_comments", {"post_id": post.id, "limit": 0}, 400, "limit")
  call_fails(forum, "search_posts", {"offset": -1}, 400, "offset")
  call_fails(forum, "search_posts", {"sort": "hot"}, 400, "sort", "'new'")
  call_fails(forum, "create_post", {"community_id": cid, "title": "", "body": "x"}, 400, "title")
  call_fails(forum, "create_post", {"community_id": cid, "title": "x"}, 400, "body")
  call_fails(forum, "reply_to_post", {"post_id": post.id, "body": ""}, 400, "body")
  call_fails(forum, "vote", {"target_id": post.id, "direction": 2}, 400, "direction")
  call_fails(forum, "vote", {"target_id": post.id}, 400, "direction")
  call_fails(forum, "list_communities", {"x": 1}, 400, "unknown argument")
  # unknown ids
  call_fails(forum, "get_post", {"post_id": "post_nope"}, 404, "post_nope")
  call_fails(forum, "list_comments", {"post_id": "post_nope"}, 404, "post_nope")
  call_fails(forum, "get_user", {"handle": "nobody_1"}, 404, "nobody_1")
  call_fails(forum, "search_posts", {"community_id": "sub_x"}, 404, "sub_x")
  call_fails(forum, "search_posts", {"author": "nobody_1"}, 404, "nobody_1")
  call_fails(forum, "create_post", {"community_id": "sub_x", "title": "t", "body": "b"}, 404)
  call_fails(forum, "reply_to_post", {"post_id": "post_nope", "body": "b"}, 404, "post_nope")
  call_fails(forum, "reply_to_comment", {"comment_id": "cmt_nope", "body": "b"}, 404, "cmt_nope")
  call_fails(forum, "vote", {"target_id": "zzz", "direction": 1}, 404, "zzz")
  call_fails(forum, "edit_comment", {"comment_id": "cmt_nope", "body": "b"}, 404, "cmt_nope")
  call_fails(forum, "delete_comment", {"comment_id": "cmt_nope"}, 404, "cmt_nope")
  call_fails(forum, "lock_post", {"post_id": "post_nope"}, 404, "post_nope")
  # conflicts: ownership
  call_fails(forum, "edit_comment", {"comment_id": other.id, "body": "x"}, 409, "your own")
  call_fails(forum, "delete_comment", {"comment_id": other.id}, 409, "your own")
  call_fails(forum, "lock_post", {"post_id": post.id}, 409, "your own")
  # conflicts: votes
  call_ok(forum, "vote", {"target_id": other.id, "direction": 1})
  call_fails(forum, "vote", {"target_id": other.id, "direction": 1}, 409, "already upvoted")
  call_ok(forum, "vote", {"target_id": other.id, "direction": -1})
  call_fails(forum, "vote", {"target_id": other.id, "direction": -1}, 409, "already downvoted")
  # conflicts: deleted comments
  reply = call_ok(forum, "reply_to_comment", {"comment_id": mine.id, "body": "nested"})
  call_ok(forum, "delete_comment", {"comment_id": mine.id})
  call_fails(forum, "delete_comment", {"comment_id": mine.id}, 409, "deleted")
  call_fails(forum, "edit_comment", {"comment_id": mine.id, "body": "x"}, 409, "deleted")
  call_fails(forum, "reply_to_comment", {"comment_id": mine.id, "body": "x"}, 409, "deleted")
  call_fails(forum, "vote", {"target_id": mine.id, "direction": 1}, 409, "deleted")
  assert forum.state.comments.get(reply["id"]).parent_id == mine.id
  # conflicts: locked posts
  top = call_ok(forum, "reply_to_post", {"post_id": mine_post.id, "body": "first"})
  call_ok(forum, "lock_post", {"post_id": mine_post.id})
  call_fails(forum, "lock_post", {"post_id": mine_post.id}, 409, "already locked")
  call_fails(forum, "reply_to_post", {"post_id": mine_post.id, "body": "x"}, 409, "locked")
  call_fails(forum, "reply_to_comment", {"comment_id": top["id"], "body": "x"}, 409, "locked")
  call_fails(forum, "no_such_tool", {}, 404, "search_posts")
