"""A copy head: the next token as a mixture of the LM head's softmax and a pointer into the context.

A small policy trained from scratch learns which tool to call long before it learns to copy the
id or the name that the call needs out of the instruction or a tool reply (README, "A policy
that learns on a CPU"): in attention, copying needs a query-key match *and* an output circuit
that writes the matched token back, learnt together. A pointer (Vinyals et al. 2015; See et al.
2017's pointer-generator) supplies the output circuit: it scores every earlier position and puts
the score's softmax on the token that followed that position, so only the match is learnt.

With the final-normed hidden states h (the LM head's input):

  p(v | t) = (1 - g_t) softmax(h_t W_head)_v + g_t sum_{s < t, x_{s+1} = v} a_ts,
  a_t = softmax_s((h_t W_q) . (h_s W_k) / sqrt(C)),   g_t = sigmoid(h_t w_g + b_g),

over the positions s of the same sequence (segment) whose next token x_{s+1} is already known.
Pointing at s means "what followed a context like this one", the induction pattern: copying a
value after its cue is one match (the cue's context), continuing the copy is the next.

With ``ModelConfig.copy_head_match`` the scores also gain m_0 [x_s = x_t] + m_1 [x_{s-1} =
x_{t-1}], two learnt scalars: continuing a copy (point at the earlier place of the token just
written, and of the one before it) is then given, and the query and key learn only where a copy
starts. With ``ModelConfig.copy_head_match_run`` R the scores also gain m_r [x_{s-i} = x_{t-i}
for every i < r] for r = 3..R: a copy continued for r tokens then points where those r tokens
stood, not at any earlier place of its last one or two (a digit of an id repeats in dates).
The scalars are stored a tenth of their value (`MATCH_SCALE`), so Adam moves them ten
times faster than a weight. With ``ModelConfig.copy_head_match_gate`` a learnt gate
sigmoid(h_t w_m + b_m) scales the whole bonus at each query: where a copy starts, the query's
token is a JSON quote whose earlier places are the values of every tool reply, and the bonus
would pull the copy to a reply's value under the same key rather than to the instruction's.

With ``ModelConfig.copy_head_forms`` the pointer copies words, not tokens. A word of a sentence
is one token with its leading space ("▁Isla") and, after a JSON quote, another without it
("Isla"), so a name in the instruction could not be copied into a call's first argument token,
nor a value of a tool reply into the answer's sentence. Each token v has a plain form w(v) (the
token without its space where both exist, else v): the pointer's mass goes to w(x_{s+1}), the
match bonus compares plain forms, and a second gate f_t = sigmoid(h_t w_f + b_f) splits the mass
of a word that has both forms:

  copy(v | t) = sum_{s: w(x_{s+1}) = w(v)} a_ts * (f_t if v is spaced, 1 - f_t if v is plain,
                1 if v has one form only),

still a distribution. The pairs come from the tokenizer (`set_word_forms`), kept in the model's
state beside its weights (`WordForms`, not trained).

The model's ``logits`` are then log p: a normalised log-probability, which softmax, sampling
and the cross-entropy take as they take logits. Off by default (``ModelConfig.copy_head``);
Qwen3.5 has no such head, and checkpoints imported from transformers do not carry one.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx, struct

from models import sharding
from models.config import ModelConfig
from models.layers import at_positions, normal


@struct.dataclass
class CopyCache:
  """Decoding state of the copy head: each position's key and each position's token (the
  value of the key one position back)."""

  k_bsc: jax.Array  # [B, S, C] keys of positions 0..S-1
  tokens_bs: jax.Array  # [B, S] int32 token at each position

  @classmethod
  def zeros(cls, config: ModelConfig, batch: int, max_len: int) -> CopyCache:
    return cls(
      k_bsc=jnp.zeros((batch, max_len, config.copy_head_dim), config.compute_dtype),
      tokens_bs=jnp.zeros((batch, max_len), jnp.int32),
    )


class WordForms(nnx.Variable):
  """A vocabulary table [V] int32 of the copy head: each token's plain or spaced form. State of
  the model, checkpointed with it, not a parameter."""


MATCH_INIT = 3.0  # each match bonus at initialisation, in score (logit) units
MATCH_SCALE = 10.0  # the bonus is stored divided by this
MATCH_GATE_INIT = 3.0  # the match gate's bias at initialisation: sigmoid(3) = 0.95


def _with_previous(
  tokens_bt: jax.Array, segment_ids_bt: jax.Array | None = None, depth: int = 2
) -> jax.Array:
  """[B, T, depth]: each position's token and the depth - 1 tokens before it (-1 before a row's
  or a segment's start, which matches nothing)."""
  tokens_bt = tokens_bt.astype(jnp.int32)
  t = tokens_bt.shape[1]
  index_t = jnp.arange(t)
  start_bt = jnp.zeros_like(tokens_bt)  # where each position's segment starts
  if segment_ids_bt is not None:
    starts_bt = jnp.pad(segment_ids_bt[:, 1:] != segment_ids_bt[:, :-1], ((0, 0), (1, 0)))
    start_bt = jax.lax.cummax(jnp.where(starts_bt, index_t, 0), axis=1)
  columns = []
  for back in range(depth):
    shifted_bt = jnp.pad(tokens_bt[:, : t - back], ((0, 0), (back, 0)), constant_values=-1)
    columns.append(jnp.where(index_t - back >= start_bt, shifted_bt, -1))
  return jnp.stack(columns, axis=-1)


class CopyHead(nnx.Module):
  """The pointer's query and key projections and the mixing gate."""

  def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs):
    d, c, dtype = config.d_model, config.copy_head_dim, config.weight_dtype
    init = normal(config.init_std)
    self.w_q_dc = sharding.param(init, rngs.params(), (d, c), ("embed", None), dtype)
    self.w_k_dc = sharding.param(init, rngs.params(), (d, c), ("embed", None), dtype)
    self.w_gate_d = sharding.param(init, rngs.params(), (d,), ("embed",), dtype)
    self.b_gate = nnx.Param(jnp.zeros((), dtype))
    if config.copy_head_match:
      self.match_2 = nnx.Param(jnp.full((2,), MATCH_INIT / MATCH_SCALE, jnp.float32))
    if config.copy_head_match_run:
      runs = config.copy_head_match_run - 2
      self.match_run = nnx.Param(jnp.full((runs,), MATCH_INIT / MATCH_SCALE, jnp.float32))
    if config.copy_head_match_gate:
      self.w_match_d = sharding.param(init, rngs.params(), (d,), ("embed",), dtype)
      self.b_match = nnx.Param(jnp.full((), MATCH_GATE_INIT, dtype))
    if config.copy_head_forms:
      self.w_form_d = sharding.param(init, rngs.params(), (d,), ("embed",), dtype)
      self.b_form = nnx.Param(jnp.zeros((), dtype))
      identity_v = jnp.arange(config.vocab_size, dtype=jnp.int32)  # every token its own word
      self.plain_v = WordForms(identity_v)
      self.spaced_v = WordForms(identity_v)
    self.config = config

  def plain(self, tokens: jax.Array) -> jax.Array:
    """Each token's plain form (the tokens themselves without ``copy_head_forms``)."""
    if not self.config.copy_head_forms:
      return tokens.astype(jnp.int32)
    return self.plain_v[...][tokens]

  def _gate_logits(self, h_btd: jax.Array, w_d: nnx.Param, b: nnx.Param) -> jax.Array:
    """h_t w + b [B, T] float32."""
    dtype = self.config.compute_dtype
    return jnp.einsum(
      "btd,d->bt", h_btd.astype(dtype), w_d[...].astype(dtype), preferred_element_type=jnp.float32
    ) + b[...].astype(jnp.float32)  # fmt: skip

  def form_logits(self, h_btd: jax.Array) -> jax.Array | None:
    """The form gate's logits [B, T] float32 (log-odds of a copy's spaced form), None without
    ``copy_head_forms``."""
    if not self.config.copy_head_forms:
      return None
    return self._gate_logits(h_btd, self.w_form_d, self.b_form)

  def match_gate(self, h_btd: jax.Array) -> jax.Array | None:
    """The share [B, T] float32 of the match bonus each query keeps, None without
    ``copy_head_match_gate``."""
    if not self.config.copy_head_match_gate:
      return None
    return jax.nn.sigmoid(self._gate_logits(h_btd, self.w_match_d, self.b_match))

  def match_weights(self) -> jax.Array | None:
    """(m_0, m_1[, m_3 .. m_R]): the score bonus of a key whose token (and the token before it)
    equal the query's, and with ``copy_head_match_run`` R that of a key whose last r tokens all
    equal the query's; None without ``copy_head_match``."""
    if not self.config.copy_head_match:
      return None
    weights = self.match_2[...]
    if self.config.copy_head_match_run:
      weights = jnp.concatenate([weights, self.match_run[...]])
    return weights.astype(jnp.float32) * MATCH_SCALE

  def match_depth(self) -> int:
    """How many of each position's last tokens the match bonus compares."""
    return max(2, self.config.copy_head_match_run)

  def project(self, h_btd: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(queries [B, T, C], keys [B, T, C], gate logits [B, T] float32) of hidden states."""
    dtype = self.config.compute_dtype
    h_btd = h_btd.astype(dtype)
    q_btc = jnp.einsum("btd,dc->btc", h_btd, self.w_q_dc[...].astype(dtype))
    k_btc = jnp.einsum("btd,dc->btc", h_btd, self.w_k_dc[...].astype(dtype))
    return q_btc, k_btc, self._gate_logits(h_btd, self.w_gate_d, self.b_gate)


class Pointer(struct.PyTreeNode):
  """What the copy distribution at some query positions needs: their queries and gate logits,
  every key position's key and next token, and which keys each query may point at."""

  q_bkc: jax.Array  # [B, K, C]
  gate_bk: jax.Array  # [B, K] float32 logits
  k_bsc: jax.Array  # [B, S, C]
  values_bs: jax.Array  # [B, S] int32: the token after key position s
  allowed_bks: jax.Array  # [B, K, S] bool
  # With ``copy_head_match``: (m_0, m_1[, m_3 .. m_R]) [max(2, R)], each query's token and the
  # ones before it [B, K, max(2, R)], each key's [B, S, max(2, R)]; None without.
  match_2: jax.Array | None = None
  query_tokens_bk2: jax.Array | None = None
  key_tokens_bs2: jax.Array | None = None
  # With ``copy_head_match_gate``: the share [B, K] of the bonus each query keeps; None without.
  match_gate_bk: jax.Array | None = None
  # With ``copy_head_forms`` (then ``values_bs`` and the match tokens are plain forms): the form
  # gate's logits [B, K] and each token's plain and spaced form [V]; None without.
  form_bk: jax.Array | None = None
  plain_v: jax.Array | None = None
  spaced_v: jax.Array | None = None

  def take(self, index_bk: jax.Array) -> Pointer:
    """The pointer at query positions ``index_bk`` [B, K'] of its K."""
    query_tokens, form, match_gate = self.query_tokens_bk2, self.form_bk, self.match_gate_bk
    if query_tokens is not None:
      query_tokens = jnp.take_along_axis(query_tokens, index_bk[..., None], axis=1)
    if form is not None:
      form = jnp.take_along_axis(form, index_bk, axis=1)
    if match_gate is not None:
      match_gate = jnp.take_along_axis(match_gate, index_bk, axis=1)
    return self.replace(
      form_bk=form,
      match_gate_bk=match_gate,
      q_bkc=jnp.take_along_axis(self.q_bkc, index_bk[..., None], axis=1),
      gate_bk=jnp.take_along_axis(self.gate_bk, index_bk, axis=1),
      allowed_bks=jnp.take_along_axis(self.allowed_bks, index_bk[..., None], axis=1),
      query_tokens_bk2=query_tokens,
    )

  def match_bonus(self) -> jax.Array | float:
    """m_0 [x_s = x_t] + m_1 [x_{s-1} = x_{t-1}] + sum_{r=3..R} m_r [x_{s-i} = x_{t-i}, i < r]
    [B, K, S], times the query's match gate where there is one (0 without
    ``copy_head_match``)."""
    if self.match_2 is None:
      return 0.0
    bonus, run_bks = 0.0, True
    for j in range(self.query_tokens_bk2.shape[-1]):
      query_bk, key_bs = self.query_tokens_bk2[..., j], self.key_tokens_bs2[..., j]
      same_bks = (query_bk[:, :, None] == key_bs[:, None, :]) & (query_bk[:, :, None] >= 0)
      run_bks = run_bks & same_bks  # the last j + 1 tokens all agree
      # m_0 and m_1 reward each agreement on its own, m_3 .. m_R the whole run.
      bonus = bonus + jnp.where(same_bks if j < 2 else run_bks, self.match_2[j], 0.0)
    if self.match_gate_bk is not None:
      bonus = bonus * self.match_gate_bk[..., None]
    return bonus

  def plain(self, tokens: jax.Array) -> jax.Array:
    """Each token's plain form (the tokens themselves without ``copy_head_forms``)."""
    return tokens if self.plain_v is None else self.plain_v[tokens]

  def log_form(self, tokens: jax.Array) -> jax.Array | float:
    """log of the form gate's share of each token's word: [B, K] for targets [B, K], [B, K, V]
    for the vocabulary [V]; 0 for a word of one form (and without ``copy_head_forms``)."""
    if self.form_bk is None:
      return 0.0
    paired = self.plain_v[tokens] != self.spaced_v[tokens]
    spaced = tokens == self.spaced_v[tokens]
    form_bk = self.form_bk if tokens.ndim == 2 else self.form_bk[..., None]
    log_share = jnp.where(spaced, jax.nn.log_sigmoid(form_bk), jax.nn.log_sigmoid(-form_bk))
    return jnp.where(paired, log_share, 0.0)


def _with_forms(pointer: Pointer, head: CopyHead, h_btd: jax.Array, at_queries) -> Pointer:
  """The pointer with the form gate and tables of ``copy_head_forms`` (unchanged without)."""
  form_bt = head.form_logits(h_btd)
  if form_bt is None:
    return pointer
  return pointer.replace(
    form_bk=at_queries(form_bt), plain_v=head.plain_v[...], spaced_v=head.spaced_v[...]
  )


def _with_match_gate(pointer: Pointer, head: CopyHead, h_btd: jax.Array, at_queries) -> Pointer:
  """The pointer with the match gate of ``copy_head_match_gate`` (unchanged without)."""
  gate_bt = head.match_gate(h_btd)
  return pointer if gate_bt is None else pointer.replace(match_gate_bk=at_queries(gate_bt))


def set_word_forms(head: CopyHead, plain_v, spaced_v) -> None:
  """Stores each vocabulary token's plain form and spaced form (a token of one form: itself in
  both), as a tokenizer gives them (`rl.data.tokenizer.word_forms`)."""
  if not head.config.copy_head_forms:
    raise ValueError("set_word_forms needs a copy head built with copy_head_forms=True")
  v = head.config.vocab_size
  tables = [jnp.asarray(t, jnp.int32) for t in (plain_v, spaced_v)]
  for table in tables:
    if table.shape != (v,) or bool(jnp.any((table < 0) | (table >= v))):
      raise ValueError(f"a word-form table must hold {v} ids in [0, {v}), got {table.shape}")
  head.plain_v[...] = tables[0]
  head.spaced_v[...] = tables[1]


def training_pointer(
  head: CopyHead,
  h_btd: jax.Array,
  tokens_bt: jax.Array,
  segment_ids_bt: jax.Array | None,
  query_index_bk: jax.Array | None = None,
) -> Pointer:
  """The pointer of a whole (packed) row: query t may point at s < t of its own segment, whose
  next token x_{s+1} the row holds. With ``query_index_bk`` [B, K] only those positions of each
  row query (the loss positions, `positions_to_score`), and no [B, T, T] array is formed."""
  q_btc, k_btc, gate_bt = head.project(h_btd)
  b, t = tokens_bt.shape
  index_bk = (
    query_index_bk if query_index_bk is not None else jnp.broadcast_to(jnp.arange(t), (b, t))
  )

  def at_queries(x_bt):  # [B, T, ...] -> [B, K, ...]
    return x_bt if query_index_bk is None else at_positions(x_bt, query_index_bk)

  allowed_bks = jnp.arange(t)[None, None, :] < index_bk[:, :, None]
  if segment_ids_bt is not None:
    allowed_bks = allowed_bks & (
      at_queries(segment_ids_bt)[:, :, None] == segment_ids_bt[:, None, :]
    )
  plain_bt = head.plain(tokens_bt)
  values_bs = jnp.pad(plain_bt[:, 1:], ((0, 0), (0, 1)))
  pointer = Pointer(at_queries(q_btc), at_queries(gate_bt), k_btc, values_bs, allowed_bks)
  pointer = _with_forms(pointer, head, h_btd, at_queries)
  match_2 = head.match_weights()
  if match_2 is not None:
    tokens_bt2 = _with_previous(plain_bt, segment_ids_bt, head.match_depth())
    pointer = pointer.replace(
      match_2=match_2, query_tokens_bk2=at_queries(tokens_bt2), key_tokens_bs2=tokens_bt2
    )
  return _with_match_gate(pointer, head, h_btd, at_queries)


def _write_rows(cache_bs, new_bt, start_b):
  """Each row's T new entries written at its own offset (leading axes [B, S, ...])."""

  def write(row, new, start):
    return jax.lax.dynamic_update_slice(
      row, new.astype(row.dtype), (start,) + (0,) * (row.ndim - 1)
    )

  return jax.vmap(write)(cache_bs, new_bt, start_b)


def cached_pointer(
  head: CopyHead,
  h_btd: jax.Array,
  tokens_bt: jax.Array,
  cache: CopyCache,
  positions_bt: jax.Array,
  cache_lengths_b: jax.Array,
) -> tuple[Pointer, CopyCache]:
  """The pointer of T new tokens that continue each row at ``cache_lengths_b`` (absolute
  positions ``positions_bt``), and the cache with their keys and tokens written: query at
  position p may point at every cached or new s < p (slots past a row's length hold stale
  entries, all at s >= p)."""
  q_btc, k_btc, gate_bt = head.project(h_btd)
  new = CopyCache(
    k_bsc=_write_rows(cache.k_bsc, k_btc, cache_lengths_b),
    tokens_bs=_write_rows(cache.tokens_bs, tokens_bt.astype(jnp.int32), cache_lengths_b),
  )
  s = new.k_bsc.shape[1]
  allowed_bts = jnp.arange(s)[None, None, :] < positions_bt[:, :, None]
  plain_bs = head.plain(new.tokens_bs)
  values_bs = jnp.pad(plain_bs[:, 1:], ((0, 0), (0, 1)))
  pointer = Pointer(q_btc, gate_bt, new.k_bsc, values_bs, allowed_bts)
  pointer = _with_forms(pointer, head, h_btd, lambda x: x)
  match_2 = head.match_weights()
  if match_2 is not None:
    key_tokens_bs2 = _with_previous(plain_bs, depth=head.match_depth())  # new slots too
    query_tokens_bt2 = jnp.take_along_axis(key_tokens_bs2, positions_bt[..., None], axis=1)
    pointer = pointer.replace(
      match_2=match_2, query_tokens_bk2=query_tokens_bt2, key_tokens_bs2=key_tokens_bs2
    )
  return _with_match_gate(pointer, head, h_btd, lambda x: x), new


def pointer_weights(pointer: Pointer) -> tuple[jax.Array, jax.Array]:
  """(softmax of the pointer's scores over the allowed keys [B, K, S], 0 elsewhere; whether a
  query has any key to point at [B, K])."""
  c = pointer.q_bkc.shape[-1]
  scores_bks = (
    jnp.einsum("bkc,bsc->bks", pointer.q_bkc, pointer.k_bsc, preferred_element_type=jnp.float32)
    * (c**-0.5)
    + pointer.match_bonus()
  )
  scores_bks = jnp.where(pointer.allowed_bks, scores_bks, -jnp.inf)
  any_bk = jnp.any(pointer.allowed_bks, axis=-1)
  weights_bks = jax.nn.softmax(jnp.where(any_bk[..., None], scores_bks, 0.0), axis=-1)
  return jnp.where(pointer.allowed_bks, weights_bks, 0.0), any_bk


def _log_gates(pointer: Pointer, any_bk: jax.Array) -> tuple[jax.Array, jax.Array]:
  """(log(1 - g), log g) [B, K]; a query with no key keeps the LM head whole (0, -inf)."""
  log_keep = jnp.where(any_bk, jax.nn.log_sigmoid(-pointer.gate_bk), 0.0)
  return log_keep, jnp.where(any_bk, jax.nn.log_sigmoid(pointer.gate_bk), -jnp.inf)


def _safe_log(x: jax.Array) -> jax.Array:
  """log x, -inf where x is 0, with a zero (not NaN) gradient there."""
  return jnp.where(x > 0, jnp.log(jnp.where(x > 0, x, 1.0)), -jnp.inf)


def mixture_logits(lm_logits_bkv: jax.Array, pointer: Pointer) -> jax.Array:
  """log p [B, K, V] (float32) of the mixture of the LM head's softmax and the copy
  distribution; a query with no position to point at keeps the LM head's distribution."""
  weights_bks, any_bk = pointer_weights(pointer)
  v = lm_logits_bkv.shape[-1]

  def scatter(weights_ks, values_s):  # sum_s weights[k, s] onto column values[s]
    return jnp.zeros((weights_ks.shape[0], v), jnp.float32).at[:, values_s].add(weights_ks)

  copy_bkv = jax.vmap(scatter)(weights_bks, pointer.values_bs)
  log_copy_bkv = _safe_log(copy_bkv)
  if pointer.plain_v is not None:  # each token gets its word's mass times its form's share
    vocab_v = jnp.arange(v)
    log_copy_bkv = log_copy_bkv[..., pointer.plain_v] + pointer.log_form(vocab_v)
  log_keep, log_gate = _log_gates(pointer, any_bk)
  lm_logp = jax.nn.log_softmax(lm_logits_bkv.astype(jnp.float32), axis=-1)
  out = jnp.logaddexp(log_keep[..., None] + lm_logp, log_gate[..., None] + log_copy_bkv)
  return sharding.constrain(out, ("act_batch", "act_seq", "act_vocab"))


def target_logp(
  lm_logp_bk: jax.Array, pointer: Pointer, targets_bk: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
  """(log p(target), log of its LM head part (1 - g) p_lm(target), log of its pointer part
  g copy(target)), each [B, K], under the mixture, from the LM head's log-probability of each
  target alone: the pointer's mass on a target is summed over the keys whose next token it is,
  so no [B, K, V] array is formed (what a training loss needs). The pointer part is -inf where
  no key's next token is the target."""
  weights_bks, any_bk = pointer_weights(pointer)
  hits_bks = pointer.values_bs[:, None, :] == pointer.plain(targets_bk)[:, :, None]
  copy_bk = jnp.sum(jnp.where(hits_bks, weights_bks, 0.0), axis=-1)
  log_keep, log_gate = _log_gates(pointer, any_bk)
  lm_bk = log_keep + lm_logp_bk
  pointer_bk = log_gate + _safe_log(copy_bk) + pointer.log_form(targets_bk)
  return jnp.logaddexp(lm_bk, pointer_bk), lm_bk, pointer_bk
