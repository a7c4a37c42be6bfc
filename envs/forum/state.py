"""Forum: the records, state and constants; the service and its tools are in ``tools``."""

from __future__ import annotations

import random
from datetime import datetime
from typing import Any, Literal

from compoworld import Record, ServiceState, Table
from envs._world import STREETS

Direction = Literal[1, -1]


class Community(Record):
  name: str  # the slug, e.g. "r/toronto_devs"
  title: str
  description: str = ""


class Post(Record):
  community_id: str
  author: str  # a user handle
  title: str
  body: str = ""
  score: int = 0
  created_at: datetime
  locked: bool = False
  flair: str | None = None


class Comment(Record):
  post_id: str
  parent_id: str | None = None  # None: a top-level reply to the post
  author: str
  body: str
  score: int = 0
  created_at: datetime
  deleted: bool = False


class User(Record):
  id: str  # the handle
  display_name: str
  email: str


class Vote(Record):
  id: str  # the id of the voted post or comment
  direction: Direction


class ForumState(ServiceState):
  #: Handle of the current user, who authors new posts and comments and owns ``votes``.
  user: str = ""
  communities: Table[Community]
  posts: Table[Post]
  comments: Table[Comment]
  users: Table[User]
  votes: Table[Vote]


WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
TOPICS = ("Rust", "Python", "Kubernetes", "data engineering", "React", "LLM tooling", "Go")
LANGS = ("Python", "TypeScript", "Go", "Rust", "Java", "Kotlin")
THINGS = (
  "bike-route planner",
  "plant watering reminder",
  "board game score tracker",
  "transit delay notifier",
  "recipe scaler",
  "budget dashboard",
  "weather-aware run planner",
  "meetup RSVP bot",
)

#: Per kind of community: (title, body, flair) templates filled from the world.
POSTS: dict[str, tuple[tuple[str, str, str], ...]] = {
  "devs": (
    (
      "{topic} meetup this {weekday} at {venue}",
      "We're hosting a {topic} night at {venue} ({address}) this {weekday} from 6:30pm. Two "
      "short talks, pizza, and plenty of time to chat. Newcomers very welcome!",
      "Meetup",
    ),
    (
      "Anyone hiring junior {lang} devs in {city}?",
      "I finished a bootcamp last month and have been building small {lang} projects since. "
      "Are any local companies open to juniors right now? Happy to share my portfolio.",
      "Jobs",
    ),
    (
      "Looking for speakers for next month's {topic} session",
      "We have two open slots of 20 minutes each. Any level of experience is fine; war stories "
      "about production incidents are especially welcome. Reply here or DM me.",
      "Meetup",
    ),
    (
      "Best co-working spots near {venue}?",
      "My team is going hybrid and we want somewhere with reliable wifi and decent coffee close "
      "to {address}. What do people use?",
      "Question",
    ),
    (
      "Recap: {topic} night at {venue}",
      "Thanks to everyone who came out! About {n} people showed up. Slides from both talks are "
      "in the meetup group and we'll post the recording once it's edited.",
      "Discussion",
    ),
    (
      "Is {lang} still worth learning in {year}?",
      "Seeing lots of mixed opinions online. For those working in {city}, what are you actually "
      "using day to day?",
      "Discussion",
    ),
    (
      "Hackathon team forming for the spring civic-tech weekend",
      "Looking for a designer and someone comfortable with maps and geo data. The theme is "
      "public transit accessibility. We'll meet at {venue} on {weekday} to plan.",
      "Meetup",
    ),
  ),
  "city": (
    (
      "Best brunch near {street}?",
      "Friends are visiting this weekend. Looking for somewhere that takes reservations and "
      "isn't a two-hour wait. Bonus points for good coffee.",
      "Food",
    ),
    (
      "Transit delays this morning?",
      "My train sat outside the station for 25 minutes and the app showed nothing. Anyone know "
      "what happened?",
      "Transit",
    ),
    (
      "Community market at {venue} this {weekday}",
      "Saw a poster for a community market at {venue} ({address}). Has anyone been before, is "
      "it worth going?",
      "Events",
    ),
    (
      "Lost: black backpack near {street}",
      "Left it on a bench on {weekday} evening. It has a red fox sticker on the front pocket. "
      "Reward if found!",
      "Ask",
    ),
    (
      "What's your favourite walk in {city}?",
      "New to {city} and I'd love a few routes for weekend walks. Parks, waterfront, anything "
      "goes.",
      "Ask",
    ),
    (
      "Construction noise on {street} from 7am",
      "It starts at 7am every day including weekends. Does anyone know who to contact at the "
      "city about permit hours?",
      "Ask",
    ),
    (
      "Library perks people don't know about",
      "You can borrow museum passes, a sewing machine and even a telescope with a library card. "
      "Highly recommend checking the catalogue.",
      "Events",
    ),
  ),
  "projects": (
    (
      "I built a {thing} over the weekend",
      "It started as a joke with my roommate and grew into a proper {lang} project. Source is "
      "on my GitHub; feedback on the UX very welcome.",
      "Show & Tell",
    ),
    (
      "How do you stay motivated on long side projects?",
      "I'm six months into a {thing} and my momentum has stalled. What keeps you going after "
      "the fun first week?",
      "Discussion",
    ),
    (
      "Feedback wanted: landing page for my {thing}",
      "I rewrote the copy three times and still can't tell if it's clear. Would love a quick "
      "read from fresh eyes.",
      "Help",
    ),
    (
      "Update: my {thing} hit {n} users",
      "Never expected strangers to use it. Hosting is still under ten dollars a month. Happy to "
      "answer questions about the stack ({lang}).",
      "Update",
    ),
    (
      "Which database for a tiny hobby app?",
      "It's a {thing} with maybe a few hundred rows. SQLite feels right but I keep "
      "second-guessing it.",
      "Help",
    ),
    (
      "Open-sourced my {thing}",
      "Finally cleaned it up enough to publish. MIT licensed. Issues and PRs welcome, "
      "especially docs.",
      "Show & Tell",
    ),
  ),
  "makers": (
    (
      "Workshop: intro to soldering at {venue}",
      "Two-hour beginner session on {weekday} at {address}. Kits provided; bring safety glasses "
      "if you have them. Max 12 people.",
      "Workshop",
    ),
    (
      "Where to buy plywood offcuts in {city}?",
      "Building a small bookshelf and don't need full sheets. Any lumber yards that sell "
      "offcuts cheaply?",
      "Question",
    ),
    (
      "3D printer keeps failing on the first layer",
      "Bed is levelled, nozzle is new, PLA at 210C. The first layer still peels at the corners. "
      "Ideas?",
      "Help",
    ),
    (
      "Finished my first mechanical keyboard",
      "Hand-wired, {n} keys, walnut case cut at the makerspace. The soldering took forever but "
      "it types beautifully.",
      "Show & Tell",
    ),
    (
      "Repair cafe at {venue} on {weekday}",
      "Bring broken lamps, toasters and clothes. Volunteers with multimeters and sewing "
      "machines will be there from 10 to 2.",
      "Events",
    ),
    (
      "Laser cutter etiquette at {venue}?",
      "I'm new and don't want to annoy anyone. How long is it okay to book the cutter for, and "
      "do people share offcuts?",
      "Question",
    ),
  ),
}

TOP_COMMENTS: dict[str, tuple[str, ...]] = {
  "devs": (
    "Count me in, I'll bring a friend from work.",
    "Thanks for organising this, the last one was great.",
    "Is there a waitlist if it fills up?",
    "We're hiring! Check our careers page and mention this thread.",
    "Would love a talk on testing strategies if anyone is up for it.",
  ),
  "city": (
    "I've had good luck with the place on {street}.",
    "Same thing happened to me last week.",
    "Try calling the city's non-emergency line, they were helpful for me.",
    "The one near {venue} is my go-to.",
    "Following, would love to know this too.",
  ),
  "projects": (
    "Great work! What stack did you use?",
    "Shipping is the hardest part, congrats.",
    "I'd use this. Any plans for a mobile version?",
    "SQLite is plenty for that size, don't overthink it.",
    "Small daily goals helped me more than big milestones.",
  ),
  "makers": (
    "Try lowering the first-layer speed and adding a brim.",
    "{venue} sells plywood offcuts on Saturdays, worth a look.",
    "Signed up, thanks for running this!",
    "Looks fantastic. Which switches did you go with?",
    "Book in two-hour blocks and clean the bed after, that's the unwritten rule.",
  ),
}
REPLIES = (
  "Agreed, +1 to this.",
  "Good shout, thanks!",
  "Not in my experience, but it may depend on the time of day.",
  "Can you share a link?",
  "Sent you a DM.",
  "Ha, I was about to say the same thing.",
  "That's what I ended up doing, works well.",
  "Do you know if they're open on weekends?",
)


def _context(rng: random.Random, city: str, venues: list, now: datetime) -> dict[str, Any]:
  venue = rng.choice(venues)
  return {
    "city": city,
    "venue": venue.name,
    "address": venue.address,
    "street": rng.choice(STREETS),
    "weekday": rng.choice(WEEKDAYS),
    "topic": rng.choice(TOPICS),
    "lang": rng.choice(LANGS),
    "thing": rng.choice(THINGS),
    "n": rng.choice((12, 25, 40, 60, 84, 150, 300)),
    "year": now.year,
  }
