import pytest
from flax import nnx

from models import RULES, abstract_model, get_config, make_mesh
from models.sharding import MESH_AXES, logical_to_spec
from tests.rl.fake_devices import run_module


@pytest.mark.parametrize("name", ["tiny", "qwen3_5_35b_a3b"])
def test_every_parameter_axis_has_a_rule(name):
  rules = dict(RULES)
  for path, variable in nnx.to_flat_state(nnx.state(abstract_model(get_config(name)), nnx.Param)):
    names = variable.get_metadata()["out_sharding"]
    assert len(names) == len(variable.shape), path
    assert all(n is None or n in rules for n in names), (path, names)
    used = [a for a in logical_to_spec(names) if a is not None]
    flat = [m for a in used for m in (a if isinstance(a, tuple) else (a,))]
    assert set(flat) <= set(MESH_AXES) and len(flat) == len(set(flat)), (path, names)


def test_mesh_shapes_are_checked():
  assert make_mesh().shape == {"data": 1, "fsdp": 1, "tensor": 1, "expert": 1}
  with pytest.raises(ValueError, match="cover"):
    make_mesh(data=2)
  with pytest.raises(ValueError, match="at most one"):
    make_mesh(data=-1, fsdp=-1)


@pytest.mark.slow
@pytest.mark.heavy  # 8 fake devices in a subprocess, two MoE backends: ~100 s
def test_sharded_forward_and_backward_equal_unsharded():
  """8 fake CPU devices (fsdp 2 x tensor 2 x expert 2), in a fresh process."""
  result = run_module("tests.models.sharded_check")
  assert result["expert_weight_spec"] == "P(None, None, 'expert', 'fsdp', 'tensor')"
  assert result["expert_shards"] == 8 and result["expert_shard_shape"] == [1, 3, 4, 32, 16]
  assert result["moe_groups"] == 4  # group-local dispatch: one group per batch shard
  assert set(result["backends"]) == {"ragged_dot", "sort"}
  for check in result["backends"].values():
    assert abs(check["loss"] - check["loss_sharded"]) <= 1e-5
    assert check["max_grad_diff"] <= 1e-5 * max(1.0, check["max_grad"])
