"""The order in which `make test`'s two pytest-xdist workers take up the suite's groups (`tests/conftest.py`)."""

from __future__ import annotations

from typing import Any

from xdist.scheduler import LoadGroupScheduling


class PinnedGroupsFirst(LoadGroupScheduling):
    """`--dist loadgroup`, except that the groups named in `pinned` are the first work of successive workers.

    xdist queues the groups by their number of tests, so a heavy group with few tests (minutes of Spark in three
    tests) could queue behind another heavy group in the same worker while the other worker ran only small tests.
    """

    def __init__(self, config: Any, log: Any = None, *, pinned: tuple[str, ...] = ()) -> None:
        super().__init__(config, log)
        self.pinned = pinned
        self._started: set[Any] = set()

    def _assign_work_unit(self, node: Any) -> None:
        if node not in self._started:
            self._started.add(node)
            first = next((group for group in self.pinned if group in self.workqueue), None)
            if first is not None:
                self.workqueue.move_to_end(first, last=False)
        super()._assign_work_unit(node)
