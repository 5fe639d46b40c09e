"""The suite's own scheduling under pytest-xdist (`make test`: `-n 2 --dist loadgroup`): a test with
an xdist group carries it as its node id's `@group` suffix, the only thing the scheduler reads
(conftest's `name_the_group`; pytest-xdist 3.8 alone writes it where pytest 9 no longer looks)."""
import pytest


@pytest.mark.xdist_group("scheduling-check")
def test_a_grouped_test_carries_its_group_in_its_node_id(request):
    if getattr(request.config.option, "loadgroup", False):
        assert request.node.nodeid.endswith("::test_a_grouped_test_carries_its_group_in_its_node_id@scheduling-check")
    else:
        assert "@" not in request.node.nodeid


@pytest.fixture(scope="module")
def built_once():
    return []


@pytest.mark.parametrize("n", range(3))
def test_a_module_fixture_puts_its_tests_in_one_group(request, built_once, n):
    """The tests of a module-scoped fixture of their own module share one group (one worker)."""
    groups = [m.args[0] for m in request.node.iter_markers("xdist_group")]
    assert groups == ["tests/test_suite_scheduling.py"]
    built_once.append(n)
    if getattr(request.config.option, "loadgroup", False):
        assert request.node.nodeid.endswith(f"[{n}]@tests/test_suite_scheduling.py")
        assert built_once == list(range(n + 1))                 # on one worker, one fixture, in order



def test_the_heavy_tests_and_their_modules_module_fixture_tests_share_one_group(request):
    """Every heavy test of the session carries the heavy group whatever else groups it (the Ray
    module's), and so does each test sharing a module fixture with a heavy test's module: the heavy
    tests take turns (conftest's lock), and in one group they never wait for each other."""
    items = request.session.items            # the whole suite's under `make test`; what was selected otherwise
    heavy = [i for i in items if i.get_closest_marker("heavy")]
    assert all(any(m.args == ("heavy",) for m in i.iter_markers("xdist_group")) for i in heavy)
    modules = {i.nodeid.split("::")[0] for i in heavy}
    assert not [i.nodeid for i in items for m in i.iter_markers("xdist_group") if m.args[:1] and m.args[0] in modules]
    if getattr(request.config.option, "loadgroup", False):
        assert all(i.nodeid.endswith("@heavy") for i in heavy)
