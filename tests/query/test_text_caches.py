"""The text helpers' caches are bounded: whatever number of distinct questions and captions a server meets, each
keeps at most its ``maxsize`` entries (and answers as without the cache)."""

from __future__ import annotations

import pytest

from lucy import text


@pytest.mark.parametrize("cached", [text._stem, text._terms_of, text.similar], ids=lambda f: f.__name__)
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


def test_terms_of_a_caption_are_the_same_once_its_entry_was_dropped():
    caption = "Text on screen: \"PLATE KX-4821\" at 8.0-20.0 s; 3 orange squares."
    first = text.terms(caption)
    text._terms_of.cache_clear()
    assert text.terms(caption) == first and "kx-4821" in first and "kx4821" in first
