"""`Kept` (services/common/kept.py): the bounded cache of what a process folded, per key."""

from __future__ import annotations

import threading

from services.common.kept import Kept


def test_a_value_is_taken_out_while_in_use_and_never_replaced_by_one_behind_it() -> None:
    kept: Kept[str, tuple[str, int]] = Kept(10, lambda value: value[1])
    kept.keep("g", ("first", 3))
    taken = kept.take("g")
    assert taken == ("first", 3) and kept.take("g") is None  # a second thread folds its own
    kept.keep("g", ("other thread", 7))
    kept.keep("g", taken)  # behind the one kept meanwhile: dropped
    assert kept.peek("g") == ("other thread", 7)
    kept.keep("g", ("next", 8))
    assert kept.peek("g") == ("next", 8)


def test_the_least_recently_kept_game_goes_first_and_size_0_keeps_nothing() -> None:
    kept: Kept[str, int] = Kept(2, lambda value: value)
    for game in ("a", "b", "c"):
        kept.keep(game, 1)
    assert len(kept) == 2 and kept.peek("a") is None and kept.peek("c") == 1
    kept.keep("b", 2)  # kept again: now the most recent
    kept.keep("d", 1)
    assert kept.peek("c") is None and kept.peek("b") == 2
    none: Kept[str, int] = Kept(0, lambda value: value)
    none.keep("a", 1)
    assert none.peek("a") is None and len(none) == 0


def test_threads_taking_and_keeping_one_game_never_share_a_value() -> None:
    kept: Kept[str, list[int]] = Kept(4, len)
    kept.keep("g", [])
    held: set[int] = set()
    longest = [0]
    clash = threading.Event()
    lock = threading.Lock()

    def work() -> None:
        for _ in range(2_000):
            value = kept.take("g") or []
            with lock:
                if id(value) in held:
                    clash.set()
                held.add(id(value))
            value.append(1)
            with lock:
                held.discard(id(value))
                longest[0] = max(longest[0], len(value))
            kept.keep("g", value)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not clash.is_set()
    final = kept.peek("g")
    assert final is not None and len(final) == longest[0]  # the furthest value is the one kept


def test_get_makes_a_value_the_most_recently_used() -> None:
    """Values never changed once kept (rendered views, owners) are read with `get`: a value
    read often stays while the least recently used one goes."""
    kept: Kept[str, bytes] = Kept(2)
    kept.keep("a", b"1")
    kept.keep("b", b"2")
    assert kept.get("a") == b"1" and kept.get("missing") is None
    kept.keep("c", b"3")  # over the size: "b" was used least recently
    assert "b" not in kept and kept.peek("a") == b"1" and kept.peek("c") == b"3"
    kept.peek("a")  # peek does not count as a use
    kept.keep("d", b"4")
    assert "a" not in kept and list(kept) == ["c", "d"]


def test_keep_returns_what_made_room_least_recently_used_first() -> None:
    kept: Kept[str, list[int]] = Kept(2)
    a, b, c = [1], [2], [3]
    assert kept.keep("a", a) == [] and kept.keep("b", b) == []
    assert kept.get("a") is a  # used: "b" is now the oldest
    assert kept.keep("c", c) == [b]
    assert list(kept) == ["a", "c"]


def test_setdefault_makes_once_and_discard_drops_only_the_same_value() -> None:
    kept: Kept[str, list[int]] = Kept(2)
    made = kept.setdefault("g", list)
    assert kept.setdefault("g", lambda: [9]) is made  # the one made first, shared
    kept.discard("g", [])  # an equal value, not the same one: left alone
    assert kept.peek("g") is made
    kept.discard("g", made)
    assert "g" not in kept
    for key in "xyz":
        kept.setdefault(key, list)
    assert list(kept) == ["y", "z"]  # bounded like keep
