"""The two test lanes are sorted by tests/conftest.py, not by hand: these checks keep `make test-fast` free of tests
that start servers, and keep the folders, fixtures and harnesses that mean "services" marked."""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
SERVER_FOLDERS = {"service", "live", "cluster"}
SERVER_FIXTURES = {"postgres_dsn", "weed", "mosquitto", "lucy_server", "shared_server", "run_lucy", "rtsp_server"}


def _lanes(collected_lanes: list) -> list:
    if not any(lane.path.endswith("test_openai_reasoner.py") for lane in collected_lanes):
        pytest.skip("collect the whole suite to check its lanes")
    return collected_lanes


def _folder(path: str) -> str:
    return Path(path).resolve().relative_to(TESTS).parts[0]


def test_server_folders_fixtures_and_harnesses_are_marked(collected_lanes: list) -> None:
    lanes = _lanes(collected_lanes)
    for lane in lanes:
        if _folder(lane.path) in SERVER_FOLDERS or SERVER_FIXTURES.intersection(lane.fixtures):
            assert lane.services, lane.nodeid
    # modules that start a scripted OpenAI server inside a test, or run `lucy` in a child process
    for name in ("tests/query/test_openai_reasoner.py::", "tests/query/test_cli.py::", "tests/cli/test_cli_usage.py::"):
        assert [lane.services for lane in lanes if lane.nodeid.startswith(name)] and \
            all(lane.services for lane in lanes if lane.nodeid.startswith(name)), name


def test_the_fast_lane_is_the_unit_and_pipeline_tests(collected_lanes: list, request: pytest.FixtureRequest) -> None:
    lanes = _lanes(collected_lanes)
    fast = [lane for lane in lanes if not lane.services]
    assert len(fast) > len(lanes) // 3  # the inner loop keeps the pure tests
    assert {_folder(lane.path) for lane in fast} >= {"query", "memory", "ingest", "watch", "eval"}
    assert any(lane.nodeid.startswith("tests/test_lint.py::") for lane in fast)  # ruff is in the inner loop
    assert request.node.nodeid in {lane.nodeid for lane in fast}  # this file starts nothing


def test_each_file_stays_in_one_piece_with_service_files_first(collected_lanes: list) -> None:
    """xdist hands whole groups (files) to workers in collection order: the long (services) files go first."""
    lanes = _lanes(collected_lanes)
    runs = [lane.path for k, lane in enumerate(lanes) if k == 0 or lanes[k - 1].path != lane.path]
    assert len(runs) == len(set(runs)), "a file's tests are split"
    kinds = [any(lane.services for lane in lanes if lane.path == path) for path in runs]
    assert kinds == sorted(kinds, reverse=True)


def test_the_heavy_files_run_one_after_another_first_and_every_other_file_is_a_group_of_its_own(
        collected_lanes: list) -> None:
    """Under ``--dist loadgroup`` the heavy files (conftest.HEAVY_FILES) share one group, so one worker runs them in
    turn, and they start first; any other file is its own group, as with loadfile."""
    from tests.conftest import HEAVY_FILES

    lanes = _lanes(collected_lanes)
    heavy = [lane for lane in lanes if lane.group == "heavy"]
    assert {Path(lane.path).relative_to(TESTS).as_posix() for lane in heavy} == HEAVY_FILES
    assert lanes[:len(heavy)] == heavy
    groups = {lane.path: lane.group for lane in lanes if lane.group != "heavy"}
    assert len(set(groups.values())) == len(groups)


def test_the_scheduler_keeps_each_file_whole_and_the_heavy_files_together() -> None:
    """``--dist loadgroup`` hands xdist's scheduler node ids; it groups them by file, the heavy files as one."""
    from tests.conftest import HEAVY_FILES, FileGroups

    groups = object.__new__(FileGroups)  # only its grouping is asked
    heavy = sorted(HEAVY_FILES)
    assert {groups._split_scope(f"tests/{path}::test_x[1]") for path in heavy} == {"heavy"}
    assert groups._split_scope("tests/watch/test_cli_watch.py::test_a") == \
        groups._split_scope("tests/watch/test_cli_watch.py::test_b[x@y]") == "watch/test_cli_watch.py"
    assert groups._split_scope("tests/query/test_cli.py::test_a") != groups._split_scope("tests/test_lanes.py::t")


def test_the_scheduler_hands_out_groups_in_collection_order() -> None:
    """xdist's loadscope hands out the groups with the most tests first unless told not to: the heavy group, of few
    tests, then started after a minute of parametrised unit files. Here a worker is given the groups one at a time,
    in the order they were collected."""
    from types import SimpleNamespace

    from tests.conftest import pytest_xdist_make_scheduler

    class Worker:
        shutting_down = False

        def __init__(self) -> None:
            self.sent: list[list[int]] = []

        def send_runtest_some(self, indexes: list[int]) -> None:
            self.sent.append(indexes)

        def shutdown(self) -> None:
            pass

    option = SimpleNamespace(loadscopereorder=True)
    values = {"dist": "loadgroup", "tx": ["1*popen"]}
    config = SimpleNamespace(option=option, getvalue=values.__getitem__)
    scheduler = pytest_xdist_make_scheduler(config, None)  # type: ignore[arg-type]
    collection = ["tests/service/test_cluster.py::test_a", "tests/query/test_kinds.py::test_a[1]",
                  "tests/query/test_kinds.py::test_a[2]", "tests/query/test_kinds.py::test_a[3]"]
    worker = Worker()
    scheduler.add_node(worker)
    scheduler.add_node_collection(worker, collection)
    scheduler.schedule()
    assert worker.sent[0] == [0]  # the heavy group's one test before the file of three
