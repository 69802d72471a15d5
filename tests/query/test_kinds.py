"""Questions parsed by kind, subject and period (lucy.query.kinds): each rule by phrasings it was written for and
phrasings it was not."""

from __future__ import annotations

import pytest

from lucy.query.kinds import CountMode, Kind, parse, period_of, subject_of


@pytest.mark.parametrize(("question", "kind"), [
    ("How many people walked by?", Kind.COUNT),
    ("Count the bikes that went past", Kind.COUNT),
    ("What was the number of dogs in the park?", Kind.COUNT),
    ("What was the plate number of the van at the gate?", Kind.OTHER),
    ("Was there a car?", Kind.PRESENCE),
    ("Did anyone walk across the grass?", Kind.PRESENCE),
    ("Any trucks?", Kind.PRESENCE),
    ("Is somebody standing by the door?", Kind.PRESENCE),
    ("When did the first car arrive?", Kind.TIME),
    ("At what point does the bus leave?", Kind.TIME),
    ("How far into the video is the fire alarm?", Kind.TIME),
    ("Which came first, the dog or the cyclist?", Kind.ORDER),
    ("Did the van arrive before the bus?", Kind.ORDER),
    ("What did the sign say?", Kind.TEXT),
    ("Which number was on the banner?", Kind.TEXT),
    ("What was the writing on the van?", Kind.TEXT),
    ("What was announced?", Kind.SPEECH),
    ("What did the guard say to the driver?", Kind.SPEECH),
    ("What colour was the van?", Kind.ATTRIBUTE),
    ("Which direction did the cyclist go?", Kind.ATTRIBUTE),
    ("How long did the van stay?", Kind.DURATION),
    ("What happened?", Kind.SUMMARY),
    ("Summarise the video", Kind.SUMMARY),
    ("What's going on in this stream?", Kind.SUMMARY),
    ("Give me a rundown of the footage", Kind.SUMMARY),
    ("Describe the last minute", Kind.SUMMARY),
    ("Why did the man run?", Kind.BEYOND),
    ("What was the woman feeling?", Kind.BEYOND),
    ("Which gate is closed?", Kind.TEXT),
    ("What platform does the shuttle leave from?", Kind.TEXT),
    ("Tell the time of day", Kind.OTHER),
    ("What is the total number of buses that went past?", Kind.COUNT),
    ("Tell me the highest number of dogs in one place", Kind.COUNT),
    # A yes-or-no question that says of a thing what no detector observes is beyond the observations; one that says
    # where it was, what it did or looked like is not.
    ("Is the bus late?", Kind.BEYOND),
    ("Was the cyclist angry with the driver?", Kind.BEYOND),
    ("Were the kids at the fountain bored?", Kind.BEYOND),
    ("Is the man by the door holding a bag?", Kind.PRESENCE),
    ("Were the people on the left visible at the end?", Kind.PRESENCE),
    ("Was the van at the kerb white?", Kind.PRESENCE),
    ("Are there giraffes?", Kind.PRESENCE),
    # What no camera observes, by kind (causes, a mind, owning, who someone is, where bound, judgements)...
    ("What made the crowd scatter?", Kind.BEYOND),
    ("Did the woman want to cross?", Kind.BEYOND),
    ("Does the old man like pigeons?", Kind.BEYOND),
    ("Was the courier trying to hide the parcel?", Kind.BEYOND),
    ("Is the boy going to jump?", Kind.BEYOND),
    ("Whose umbrella was left on the step?", Kind.BEYOND),
    ("Who owns the blue car?", Kind.BEYOND),
    ("Were the two joggers friends?", Kind.BEYOND),
    ("What is the name of the man in the hat?", Kind.BEYOND),
    ("How old was the girl with the kite?", Kind.BEYOND),
    ("Where was the taxi heading?", Kind.BEYOND),
    ("What will the dog do next?", Kind.BEYOND),
    ("Was the lorry parked legally?", Kind.BEYOND),
    ("Is it safe to cross at the lights?", Kind.BEYOND),
    # ... and the same words where what is asked is seen.
    ("Was anyone going to the door?", Kind.PRESENCE),
    ("Did the kite look like a bird?", Kind.PRESENCE),
    ("What did the poster look like?", Kind.OTHER),
    ("Do you know what the sign said?", Kind.TEXT),
])
def test_each_kind_is_read_from_the_questions_structure(question, kind):
    assert parse(question).kind is kind


@pytest.mark.parametrize(("noun", "name"), [
    ("pedestrians", "person"), ("someone", "person"), ("children", "person"), ("vans", "vehicle"),
    ("a lorry", "vehicle"), ("buses", "vehicle"), ("bikes", "bicycle"), ("cyclist", "bicycle"), ("puppies", "dog"),
    ("kitten", "cat"), ("animals", "animal"), ("motorbike", "motorcycle"),
])
def test_everyday_nouns_name_the_detectors_classes(noun, name):
    subject = subject_of(f"how many {noun} were there")
    assert subject is not None and subject.name == name


@pytest.mark.parametrize(("text", "name"), [
    ("Was there a giraffe?", "giraffe"), ("How many zebras crossed?", "zebra"),
    ("Any traffic lights?", "traffic light"), ("Did a fire hydrant appear?", "fire hydrant"),
])
def test_every_class_the_detector_names_is_a_subject_by_its_own_name(text, name):
    subject = subject_of(text)
    assert subject is not None and subject.name == name and subject.labels == {name}


def test_count_modes_by_structure():
    assert parse("What was the greatest number of cars parked together?").count_mode is CountMode.AT_ONCE
    assert parse("What total of cyclists rode by?").count_mode is CountMode.TOTAL


def test_the_first_part_and_the_first_half_are_periods():
    part = period_of("describe the early part of the video")
    assert part.bounds(200.0) == (0.0, 50.0)  # the start: the first minute, at most a quarter
    half = period_of("summarise the first half")
    assert half.bounds(200.0) == (0.0, 100.0)


def test_things_the_detector_does_not_know_have_no_subject():
    for text in ("How many orange squares were shown?", "What did the sign say?", "Was the gate closed?"):
        assert subject_of(text) is None


def test_a_van_and_a_car_are_one_vehicle_group():
    van, car = subject_of("was there a van"), subject_of("a car")
    assert van.labels == car.labels and {"car", "truck", "bus"} <= van.labels


@pytest.mark.parametrize(("text", "bounds"), [
    ("what happened", (0.0, 300.0)),
    ("what happened at the start", (0.0, 60.0)),
    ("in the first two minutes", (0.0, 120.0)),
    ("what happened in the last minute", (240.0, 300.0)),
    ("in the final 30 seconds", (270.0, 300.0)),
    ("between 1:00 and 2:00", (60.0, 120.0)),
    ("from 90 seconds to 2 minutes", (90.0, 120.0)),
    ("after 30 seconds", (30.0, 300.0)),
    ("before 1:30", (0.0, 90.0)),
    ("at 1:20", (80.0, 80.0)),
    ("at the end", (300.0, 300.0)),
    ("right now", (300.0, 300.0)),
])
def test_periods_resolve_against_the_horizon(text, bounds):
    assert period_of(text).bounds(300.0) == bounds


def test_the_start_of_a_short_clip_is_its_first_quarter():
    assert period_of("what happened at the start").bounds(80.0) == (0.0, 20.0)
    assert period_of("at the beginning").bounds(3600.0) == (0.0, 60.0)  # a long stream: its first minute


def test_count_modes():
    assert parse("How many people walked by?").count_mode is CountMode.TOTAL
    assert parse("How many people were in view at once?").count_mode is CountMode.AT_ONCE
    assert parse("What is the most cars seen at the same time?").count_mode is CountMode.AT_ONCE
    assert parse("How many cars are there now?").count_mode is CountMode.MOMENT
    assert parse("How many people are there?").count_mode is CountMode.MOMENT
    assert parse("How many people at 1:20?").count_mode is CountMode.MOMENT


def test_details_of_the_subject():
    q = parse("Did a red car stop at the gate?")
    assert (q.kind, q.subject.name, q.colour, q.still) == (Kind.PRESENCE, "vehicle", "red", True)
    assert parse("Was anyone in a blue coat here?").colour is None  # the coat's colour, not the person's
