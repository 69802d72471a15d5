"""The text helpers' caches are bounded: whatever number of distinct questions and captions a server meets, each
keeps at most its ``maxsize`` entries (and answers as without the cache)."""

from __future__ import annotations

import pytest

from lucy import text


@pytest.mark.parametrize("cached", [text._stem_word, text._terms_of, text.similar], ids=lambda f: f.__name__)
def test_each_cache_stops_growing_at_its_bound(cached):
    bound = cached.cache_info().maxsize
    assert bound is not None and bound <= 65_536  # bounded, and small enough to cost tens of MiB at most
    cached.cache_clear()
    for k in range(bound + 100):
        word = f"word{k}x"
        if cached is text._terms_of:
            cached(f"A caption number {k} with {word}", False)
        elif cached is text.similar:
            cached(word, "word1x")
        else:
            cached(word)
    assert cached.cache_info().currsize == bound


def test_numbers_and_codes_are_their_own_terms_and_leave_the_word_memo_alone():
    """A live stream's captions bring new times and counts every minute: they must not fill the word memo."""
    text._stem_word.cache_clear()
    assert text.terms("At 125.5-126.0 s: 12, then 14 at 130.0 s; 2.0-9.0 s: 4821") == [
        "125.5-126.0", "12551260", "125.5", "126.0", "s", "12", "14", "130.0", "s", "2.0-9.0", "2090", "2.0", "9.0",
        "s", "4821"]
    assert text._stem_word.cache_info().currsize == 1  # "s" alone
    found = text.terms("12 people near BUS12 and KX-4821")
    assert found == ["12", "person", "near", "bus12", "bus", "12", "kx-4821", "kx4821", "kx", "4821"]
    assert text._stem_word.cache_info().currsize == 5  # s, people, near, bus, kx: the words only


def test_terms_of_a_caption_are_the_same_once_its_entry_was_dropped():
    caption = "Text on screen: \"PLATE KX-4821\" at 8.0-20.0 s; 3 orange squares."
    first = text.terms(caption)
    text._terms_of.cache_clear()
    assert text.terms(caption) == first and "kx-4821" in first and "kx4821" in first
