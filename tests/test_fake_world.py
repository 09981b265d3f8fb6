"""FakeWorld: a world size for argument checks, with no other process and no communication."""
import pytest
import torch
import torch.distributed as dist

from solutions_lib.dist.fake_world import FakeWorld


def test_reports_the_world_it_was_given_and_tears_it_down():
    with FakeWorld(4, rank=3) as w:
        assert (dist.get_world_size(), dist.get_rank(), dist.get_backend()) == (4, 3, "fake")
        t = torch.arange(3.0)
        dist.all_reduce(t)                       # returns at once, changes nothing
        assert t.tolist() == [0.0, 1.0, 2.0]
        assert repr(w) == "FakeWorld(world_size=4, rank=3)"
    assert not dist.is_initialized()


def test_tears_down_after_an_exception_and_can_be_entered_again():
    with pytest.raises(ZeroDivisionError):
        with FakeWorld(2):
            1 / 0
    assert not dist.is_initialized()
    with FakeWorld(2):
        assert dist.get_world_size() == 2


def test_refuses_to_replace_an_existing_group():
    with FakeWorld(2):
        with pytest.raises(RuntimeError, match="already exists"):
            with FakeWorld(3):
                pass
        assert dist.get_world_size() == 2       # the outer group is untouched
    assert not dist.is_initialized()


@pytest.mark.parametrize("args", [(0,), (True,), (2.0,), (2, 2), (2, -1), (2, True)])
def test_bad_arguments(args):
    with pytest.raises(ValueError):
        FakeWorld(*args)
