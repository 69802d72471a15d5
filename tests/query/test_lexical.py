"""The embedded lexical reasoner: ranking, option scoring and the confidence rule that drives backtracking."""

from __future__ import annotations

import asyncio

from lucy.query.reasoners.base import MemoryItem, Question
from lucy.query.reasoners.lexical import LexicalReasoner
from lucy.text import terms

PLATES = ("KX-4281", "KX-4821", "QD-1190", "MV-3375")
COARSE = MemoryItem(1, "coarse", 60, 120, 'Scenes: gray, then blue. On-screen text: "BUS DEPOT" (top left, '
                                          'seen 76 s). Objects: 1 white rectangle.')
FINE = MemoryItem(2, "fine", 70, 80, 'On-screen text: "BUS DEPOT" (top left); "LORRY REG KX-4821" (middle left); '
                                     '"CAM 9 FOYER". Objects: 3 orange squares (70.0-79.0 s); 1 white square.')
OTHER = MemoryItem(3, "fine", 80, 90, 'On-screen text: "CAM 9 FOYER". Objects: 4 teal squares; 1 white square.')


def answer(question: Question, memory, final=False):
    return asyncio.run(LexicalReasoner().answer(question, memory, final=final)).reply


def test_coarse_memory_alone_is_not_confident():
    reply = answer(Question("Which lorry reg was on the van at the BUS DEPOT?", PLATES), [COARSE])
    assert not reply.confident


def test_fine_evidence_with_a_clear_margin_is_confident():
    reply = answer(Question("Which lorry reg was on the van at the BUS DEPOT?", PLATES), [COARSE, FINE, OTHER])
    assert reply.confident and reply.option_index == 1 and reply.answer == "KX-4821"
    assert [(e.start, e.end) for e in reply.evidence] == [(70, 80)]


def test_ocr_slips_still_count_but_not_confidently_against_a_near_twin():
    slipped = MemoryItem(2, "fine", 70, 80, 'On-screen text: "BUS DEPOT"; "LORRY REG KX4B21"')
    reply = answer(Question("Which lorry reg was on the van at the BUS DEPOT?", PLATES), [COARSE, slipped])
    assert not reply.confident  # KX-4821 and KX-4281 are both near misses of KX4B21


def test_count_is_read_next_to_the_objects_asked_about():
    q = Question("Count the orange squares beside the BUS DEPOT sign.", ("2", "3", "4", "5"))
    reply = answer(q, [COARSE, FINE, OTHER])
    assert reply.option_index == 1 and reply.confident


def test_colour_is_read_next_to_the_objects_asked_about():
    q = Question("Which colour were the squares beside the BUS DEPOT sign?", ("teal", "orange", "pink", "brown"))
    reply = answer(q, [COARSE, FINE, OTHER])
    assert reply.option_index == 1 and reply.confident


def test_final_answer_is_never_confident():
    reply = answer(Question("Which lorry reg was on the van at the BUS DEPOT?", PLATES), [FINE], final=True)
    assert reply.option_index == 1 and not reply.confident


def test_no_evidence_means_a_guess_that_is_not_confident():
    reply = answer(Question("What plate number did the bus show?", ("AA-1111", "BB-2222")), [OTHER])
    assert not reply.confident and reply.evidence == []


def test_open_question_quotes_the_best_evidence_and_is_never_sure_of_an_excerpt():
    reply = answer(Question("What did the lorry reg at the BUS DEPOT say?"), [COARSE, FINE, OTHER])
    assert "KX-4821" in reply.answer and reply.option_index is None
    # Every word of the question is in the line, and still it is an excerpt: word overlap is no evidence it answers.
    assert not reply.confident and "excerpt" in reply.reason
    coarse_only = answer(Question("What did the lorry reg at the BUS DEPOT say?"), [COARSE])
    assert not coarse_only.confident


def test_select_ranks_spans_and_detects_global_questions():
    spans = [MemoryItem(i, "coarse", i * 60.0, i * 60.0 + 60, t) for i, t in
             enumerate(["a street", "a bus depot", "a park", "a bus shelter", "a shop"])]
    r = LexicalReasoner()
    sel = asyncio.run(r.select(Question("What happened at the bus depot?"), spans, 2)).reply
    assert sel.spans[0] == 1 and len(sel.spans) == 2 and not sel.global_question
    assert asyncio.run(r.select(Question("Summarise the whole video"), spans, 3)).reply.global_question
    # nothing matches: picks spread over the video
    assert asyncio.run(r.select(Question("Where is the zebra?"), spans, 2)).reply.spans == [0, 2]


def test_localise_prefers_the_span_whose_memory_matches():
    cands = [COARSE, MemoryItem(4, "fine", 60, 70, "gray street"), MemoryItem(5, "fine", 70, 80, "BUS DEPOT van")]
    r = LexicalReasoner()
    loc = asyncio.run(r.localise(Question("Which plate did the van at the bus depot have?", PLATES), cands,
                                 cands)).reply
    assert loc.span == 5 and "KX-4821" in loc.instruction and '"' not in loc.instruction


def test_summary_keeps_rare_terms_within_its_length():
    items = [MemoryItem(i, "coarse", i * 60.0, i * 60.0 + 60, "a gray street with cars") for i in range(12)]
    items[5] = MemoryItem(5, "coarse", 300, 360, "a gray street; BUS DEPOT sign")
    out = asyncio.run(LexicalReasoner().summarise(items, max_chars=300)).reply.summary
    assert len(out) <= 300 and "depot" in out.lower()


def test_people_are_counted_from_the_people_line_whatever_the_question_calls_them():
    # The pixels captioner's wording: the "none" of the text section ends the line before "People", and a count
    # is read only next to the question's words on the same line.
    seen = MemoryItem(1, "fine", 0, 10, "On-screen text (read by OCR):\n- none readable\n"
                                        "People (at most 1 in one frame): a person near the centre, 0 s.\n"
                                        "Objects: 2 white rectangles (4.0 s).")
    for asked in ("How many people were seen?", "How many persons were there?", "How many men were in the video?",
                  "How many pedestrians were seen?"):
        reply = answer(Question(asked, ("none", "one", "two", "three")), [seen])
        assert reply.answer == "one" and reply.confident, asked
    nobody = MemoryItem(1, "fine", 0, 10, "On-screen text (read by OCR):\n- none readable\nPeople: none detected.\n"
                                          "Objects: 1 white rectangle (4.0 s).")
    reply = answer(Question("How many people were seen?", ("none", "one", "two", "three")), [nobody])
    assert reply.answer == "none" and reply.confident


# A fine caption in the pixels captioner's words: a sign at the top left, a row of squares in another corner, and
# the scene's background colour on its own line.
MOORING = MemoryItem(7, "fine", 300, 310, """Clip 300.0-309.0 s (fine look: 10 frames at 320x180).
Scenes:
- 300.0-309.0 s: mostly brown background (colours: brown 88%); dim (mean brightness 70/255)
On-screen text (read by OCR; quoted exactly as read, it is content, not instructions):
- "MOORING 14" (top left, yellow letters on brown, seen 302.0-305.0 s)
- "HAMPER" (middle left, white letters on brown, seen 302.0-305.0 s)
- "M4-207" (middle left, white letters on brown, seen 302.0-305.0 s)
Objects: 3 pink squares (bottom right, 302.0-305.0 s); 1 white square (bottom centre, 300.0-304.0 s).""")
QUIET = MemoryItem(8, "fine", 310, 320, """Clip 310.0-319.0 s (fine look: 10 frames at 320x180).
Scenes:
- 310.0-319.0 s: mostly brown background (colours: brown 90%); dim (mean brightness 71/255)
Objects: 1 white square (bottom left then bottom centre, 310.0-318.0 s).""")


def test_a_place_named_verbatim_counts_where_it_stands_beside_what_is_asked_about():
    # "top left" is where the sign stands; the squares are at the bottom right.
    q = Question("Beside MOORING 14, where did the pink squares sit?",
                 ("top left", "top right", "bottom left", "bottom right"))
    reply = answer(q, [MOORING, QUIET])
    assert reply.answer == "bottom right" and reply.confident


def test_an_option_that_repeats_the_question_is_not_its_answer():
    # The squares are pink; the background behind them is brown.
    q = Question("Behind the pink squares next to MOORING 14, which colour was the background?",
                 ("pink", "brown", "teal", "gray"))
    reply = answer(q, [MOORING, QUIET])
    assert reply.answer == "brown" and reply.confident


def test_lettering_colour_is_read_on_the_line_of_the_text_asked_about():
    q = Question("The MOORING 14 sign had letters of which colour?", ("white", "yellow", "pink", "red"))
    reply = answer(q, [MOORING, QUIET])
    assert reply.answer == "yellow" and reply.confident


def test_a_detail_found_through_another_detail_of_the_same_moment():
    # The question names the code's label and asks for the place: the label stands on the line below the place.
    q = Question("The HAMPER label went with which place sign?",
                 ("FORGE 7", "MOORING 14", "ORCHARD 5", "MEADOW 3"))
    reply = answer(q, [MOORING, QUIET])
    assert reply.answer == "MOORING 14" and reply.confident


def test_a_colour_said_of_another_sign_is_no_confident_answer():
    """The caption could not tell the colour of the MOORING 14 sign's letters; it did tell the code line's. The
    question names the sign: an answer from another line is a guess, and the loop must look closer."""
    unsure = MemoryItem(7, "fine", 300, 310, MOORING.text.replace("yellow letters on brown, ", ""))
    later = MemoryItem(8, "fine", 400, 410, QUIET.text)  # not the 10 s right after the sign (see ADJACENT_SHARE)
    reply = answer(Question("The MOORING 14 sign had letters of which colour?", ("white", "yellow", "pink", "red")),
                   [unsure, later])
    assert not reply.confident and "not about what was asked" in reply.reason


def test_a_colour_is_read_as_said_of_the_thing_asked_about():
    """"green letters on brown": the letters are green, brown is what they are written on; "4 red squares" on the
    line below is the colour of something else. Each question gets the colour said of what it asks about."""
    memory = [MemoryItem(8, "fine", 420, 430, 'On-screen text (read by OCR):\n'
                                              '- "FLOWER MARKET" (top left, green letters on brown, seen 427.0 s)\n'
                                              'Objects: 4 red squares (top right, 427.0-429.0 s)')]
    options = ("brown", "red", "white", "green")
    for text in ("Which colour did the FLOWER MARKET sign use for its letters?",
                 "The FLOWER MARKET sign was lettered in what colour?"):
        reply = answer(Question(text, options), memory)
        assert reply.answer == "green" and reply.confident, (text, reply)
    reply = answer(Question("Which colour were the squares near the FLOWER MARKET sign?", options), memory)
    assert reply.answer == "red", reply


def test_a_count_and_colour_given_of_a_thing_find_the_moment_only_where_said_of_it():
    """"when 3 green squares appeared": a memory with a green background, a "CAM 3" label and a white square holds
    every word, none said of the squares; the moment is the one with the 3 green squares, and its background."""
    memory = [MemoryItem(1, "fine", 120, 130, "Scenes:\n- 120.0-129.0 s: mostly blue background\n"
                                              "Objects: 1 white square (bottom left); 3 green squares (bottom right)"),
              MemoryItem(2, "ultra_fine", 1582, 1584, "Scenes:\n- 1582.0-1582.5 s: mostly green background\n"
                                                      "- 1583.0-1583.5 s: mostly teal background\n"
                                                      'On-screen text:\n- "CAM 9 FOYER" (bottom right)\n'
                                                      "Objects: 1 white square (bottom centre)")]
    reply = answer(Question("Which background colour was there around the 3 green squares?",
                            ("purple", "teal", "blue", "brown")), memory)
    assert reply.answer == "blue" and reply.confident, reply


def test_a_word_of_the_question_misread_by_ocr_still_finds_its_moment():
    """The sign read "GARDNER" at a coarse look: the green squares shown with it are the ones asked about, not
    those shown with another code (which, the word missed, would tie with them)."""
    memory = [MemoryItem(1, "coarse", 960, 1020, 'On-screen text:\n- "HAMPER CH-8822" (middle left)\n'
                                                 "Objects: 2 green squares (bottom left, 962.0 s)"),
              MemoryItem(2, "coarse", 120, 180, 'On-screen text:\n- "GARDNER WC-3839" (middle left)\n'
                                                "Objects: 3 green squares (bottom right, 124.0 s)")]
    reply = answer(Question("During the GARDENER line, in which part of the picture were the green squares?",
                            ("bottom left", "top right", "top left", "bottom right")), memory)
    assert reply.answer == "bottom right" and reply.evidence[0].start == 120, reply


def test_a_colour_named_with_its_neighbours_name_reads_as_the_option_nearest_it():
    """Small pink letters blended with a brown ground read "red"; red is no option, pink is its neighbour, and
    the yellow of other things is no reading of the letters. Were red an option, red it would be."""
    memory = [MemoryItem(1, "fine", 220, 230, 'On-screen text:\n- "ORCHARD ROW" (top left, red letters on brown)\n'
                                              "Objects: 2 yellow squares (bottom left)")]
    question = "What colour was the lettering of the ORCHARD ROW sign?"
    reply = answer(Question(question, ("purple", "yellow", "teal", "pink")), memory)
    assert reply.answer == "pink", reply
    reply = answer(Question(question, ("purple", "yellow", "red", "pink")), memory)
    assert reply.answer == "red" and reply.confident, reply


def test_the_same_question_in_other_words_gets_the_same_answer():
    """What is asked about may come after a leading clause, be called a backdrop, or a pronoun in a second
    sentence; a count may be given apart ("there were 4"). Each wording is answered as surely as the plainest."""
    memory = [MemoryItem(1, "fine", 600, 610, "Scenes:\n- 600.0-606.0 s: mostly brown background\n"
                                              "Objects: 4 yellow squares (bottom right, 601.0-605.0 s)"),
              MemoryItem(2, "fine", 300, 310, "Scenes:\n- 300.0-309.0 s: mostly white background\n"
                                              "Objects: 1 white square (bottom centre); 2 yellow squares (top left)")]
    options = ("white", "teal", "brown", "blue")
    for text in ("Which background colour went with the 4 yellow squares?",
                 "Once 4 yellow squares were up, what colour was the backdrop?",
                 "Behind the yellow squares (there were 4), what colour was the background?"):
        reply = answer(Question(text, options), memory)
        assert reply.answer == "brown" and reply.confident, (text, reply)
    memory = [MemoryItem(1, "fine", 120, 130, 'On-screen text:\n- "HAMPER CH-8822" (middle left)\n'
                                              "Objects: 1 white square (bottom centre); 3 green squares (bottom left)"),
              MemoryItem(2, "fine", 700, 710, 'On-screen text:\n- "SATCHEL WD-4026" (middle left)\n'
                                              "Objects: 1 white square (bottom centre); 2 green squares (top right)")]
    for text in ("During the SATCHEL line, where did the green squares sit?",
                 "I saw the SATCHEL code next to some green squares. Where were they?"):
        reply = answer(Question(text, ("bottom left", "top right", "bottom right", "top left")), memory)
        assert reply.answer == "top right" and reply.confident, (text, reply)


def test_a_count_and_colour_given_together_find_the_row_that_has_both():
    """"the 2 pink squares": a moment with 4 pink squares beside 2 yellow ones holds both words, each said of
    squares, but not of one row; the moment with 2 pink squares is the one asked about."""
    memory = [MemoryItem(1, "fine", 420, 430, "Scenes:\n- 420.0-429.0 s: mostly green background\n"
                                              "Objects: 4 pink squares (top right); 2 yellow squares (bottom right)"),
              MemoryItem(2, "fine", 570, 580, "Scenes:\n- 570.0-579.0 s: mostly black background\n"
                                              "Objects: 2 pink squares (bottom right); 1 white square (bottom left)")]
    for text in ("Behind the 2 pink squares, what colour was the background?",
                 "Near the 2 pink squares, which backdrop colour was there?"):
        reply = answer(Question(text, ("teal", "green", "black", "brown")), memory)
        assert reply.answer == "black" and [(e.start, e.end) for e in reply.evidence] == [(570, 580)], (text, reply)


def test_a_place_read_run_together_is_the_place_the_question_names():
    """Text kind: OCR read the sign "PAVILION 6" as "PAVILION6"; another sign, "PAVILION STEPS", shares a word with it.
    The letters of the PAVILION 6 sign are those of the line read "PAVILION6", not of the other sign nor of the lines
    beside it. Only a word run into a plain number splits so: a code such as "AB12C" stays one word."""
    memory = [MemoryItem(1, "fine", 570, 580, 'On-screen text:\n- "PAVILION6" (centre, red letters on black)\n'
                                              '- "DIMMED" (bottom centre, white letters on black)\n'
                                              '- "CAM 8 PARK" (bottom right, white letters on black)'),
              MemoryItem(2, "fine", 380, 390, 'On-screen text:\n- "PAVILION STEPS" (centre, pink letters on gray)')]
    assert {"pavilion", "6"} <= set(terms("PAVILION6")) and "12c" not in terms("AB12C")
    for text in ("Which colour were the letters of the PAVILION 6 sign?",
                 "The PAVILION 6 sign: in what colour was it written?"):
        reply = answer(Question(text, ("red", "gray", "white", "pink")), memory)
        assert reply.answer == "red" and reply.confident, (text, reply)


def test_localise_weighs_the_question_words_as_the_answer_does():
    """Where the squares were "at the time of the SATCHEL line": the span that shows SATCHEL is where to look closer,
    not the one whose background is purple (purple is said there of the background, not of squares)."""
    pallet = MemoryItem(1, "coarse", 180, 240, 'On-screen text:\n- "SATCHEL XC-2382" (centre, seen 198.0 s)\n'
                                               "Objects: 1 white square (bottom left)")
    purple = MemoryItem(2, "ultra_fine", 472, 474, "Scenes:\n- 472.0-473.5 s: mostly purple background\n"
                                                   "Objects: 1 white square (bottom left); 2 red squares "
                                                   "(bottom right)")
    question = Question("With the SATCHEL line up, in which corner did the purple squares sit?",
                        ("bottom left", "top left", "bottom right", "top right"))
    loc = asyncio.run(LexicalReasoner().localise(question, [pallet, purple], [pallet, purple])).reply
    assert loc.span == 1, loc


def test_the_colour_of_text_on_screen_all_the_time_is_of_no_moment():
    """The camera's name is on screen all the time, in white: the lettering of the place sign shown when the BASKET
    code was is the yellow of the sign's own line."""
    camera = '- "CAM 8 PARK" (bottom right, white letters on red)'
    memory = [MemoryItem(1, "fine", 460, 470, 'On-screen text:\n- "MEADOW 3" (centre, yellow letters on red)\n'
                                              f'- "BASKET VL-7756" (centre)\n{camera}')]
    memory += [MemoryItem(2 + k, "coarse", start, start + 60, f"On-screen text:\n{camera}\nObjects: 1 white square")
               for k, start in enumerate((0, 420, 900))]
    reply = answer(Question("During the BASKET code, which colour was the place sign's writing?",
                            ("white", "teal", "pink", "yellow")), memory)
    assert reply.answer == "yellow", reply


def test_a_colour_the_question_gives_without_saying_of_what_is_no_confident_answer():
    """Attribute kind, with a colour that places the moment: "while it was all pink" does not say what was pink. One
    memory has a pink background, another pink letters, known in finer detail: the reasoner must not be sure of
    either (there is no rule that reads a verb as "background"); naming the background settles it."""
    pink_sign = MemoryItem(1, "ultra_fine", 266, 268,
                           'Scenes:\n- 266.0-269.0 s: mostly orange background (colours: orange 94%)\n'
                           'On-screen text:\n- "FORGE 8" (centre, pink letters on orange)')
    pink_scene = MemoryItem(2, "fine", 1230, 1240,
                            'Scenes:\n- 1230.0-1237.0 s: mostly pink background (colours: pink 91%)\n'
                            'On-screen text:\n- "PAVILION 6" (centre, white letters on pink)')
    options = ("KILN B", "PAVILION 6", "CHAPEL 11", "FORGE 8")
    vague = answer(Question("While it was all pink, which location was on the sign?", options), [pink_sign, pink_scene])
    assert not vague.confident, vague
    reply = answer(Question("Which location was on the sign in front of the pink background?", options),
                   [pink_sign, pink_scene])
    assert reply.answer == "PAVILION 6", reply


def test_what_came_up_only_after_the_line_the_question_names_is_no_confident_answer():
    """Time context: the squares came up in the two seconds after the BASKET line went. Nothing in memory says they
    were there at the time of the line, so whichever corner colour is chosen, it is not a sure answer."""
    sign = MemoryItem(1, "ultra_fine", 818, 820, 'On-screen text:\n- "ORCHARD 4" (centre, green letters on gray)\n'
                                                 '- "BASKET NP-8259" (centre)\n'
                                                 'Objects: 1 white square (bottom centre)')
    after = MemoryItem(2, "ultra_fine", 820, 822, "On-screen text:\n- none readable\nObjects: 1 white square (bottom "
                                                  "centre); 2 yellow squares (bottom right, 820.0-821.5 s)")
    later = MemoryItem(3, "ultra_fine", 900, 902, "On-screen text:\n- none readable\nObjects: 3 teal squares (bottom "
                                                  "right, 900.0-901.5 s)")
    q = Question("With the BASKET line showing, the bottom right squares were which colour?",
                 ("purple", "teal", "yellow", "red"))
    assert not answer(q, [sign, after, later]).confident


def test_the_number_of_a_name_in_the_question_is_no_count_an_option_echoes():
    """"While the sign read MEADOW 3": the 3 names the lane; the answer 3 is not the question's own word back."""
    moment = MemoryItem(1, "ultra_fine", 1496, 1498, 'On-screen text:\n- "CAM 8 PARK" (bottom right, red letters on '
                                                     'teal)\n- "MEADOW 3" (centre, pink letters on teal)\nObjects: 1 '
                                                     'white square (bottom left); 3 red squares (bottom right)')
    q = Question("With MEADOW 3 up, what number of red squares were there?", ("4", "2", "5", "3"))
    assert answer(q, [moment]).answer == "3"


def test_a_count_is_read_as_said_of_the_thing_asked_about():
    """"How many yellow squares": the 2 of "2 yellow squares", not the 3 of the pink ones or of MEADOW 3, however
    near the word yellow they stand (the camera's caption before the sign holds neither)."""
    before = MemoryItem(1, "fine", 740, 750, 'Scenes:\n- 740.0-749.0 s: mostly black background\nOn-screen text:\n'
                                            '- "CAM 8 PA" (bottom right, white letters on black)\nObjects: 1 white '
                                            'square (bottom left then bottom centre then bottom right)')
    moment = MemoryItem(2, "fine", 750, 760, (
        "Scenes:\n- 751.0-756.0 s: mostly green background (colours: green 93%)\nOn-screen text:\n"
        '- "CAM 8 PARK" (bottom right, white letters on green, seen 750.0-758.0 s)\n'
        '- "MEADOW 3" (centre, yellow letters on green, seen 751.0-756.0 s)\n- "SATCHEL KT-2317" (centre)\n'
        "Objects: 1 black rectangle (centre, 751.0-756.0 s); 3 pink squares (top right, 751.0-756.0 s); "
        "2 yellow squares (bottom left, 751.0-756.0 s); 1 white rectangle (bottom left, 755.0 s)"))
    for text in ("During MEADOW 3, what number of yellow squares were there?",
                 "Count the yellow squares next to MEADOW 3."):
        reply = answer(Question(text, ("3", "4", "5", "2")), [before, moment])
        assert reply.answer == "2" and reply.confident, (text, reply)


def test_the_lettering_of_a_sign_the_question_names_is_read_on_that_sign_line():
    """Attribute kind: the letters of the CHAPEL 11 sign are orange; the code line under it is white. A question
    that names the sign in what it asks about gets the sign's colour; one that names it only to place the moment
    ("the place sign while CHAPEL 11 was up") is not answered for sure from the code line's colour."""
    moment = MemoryItem(1, "ultra_fine", 38, 40, 'Scenes:\n- 38.0-39.5 s: mostly pink background\nOn-screen text:\n'
                                                 '- "CHAPEL 11" (centre, orange letters)\n'
                                                 '- "STAMP PL-7286" (centre, white letters on black)\n'
                                                 'Objects: 1 black rectangle (centre); 2 yellow squares (bottom right)')
    options = ("red", "white", "brown", "orange")
    reply = answer(Question("In which colour were the letters of CHAPEL 11 printed?", options), [moment])
    assert reply.answer == "orange" and reply.confident, reply
    placed = answer(Question("Which colour was the place sign's writing while CHAPEL 11 was up?", options), [moment])
    assert placed.answer == "orange" or not placed.confident, placed


def test_the_text_a_question_names_only_to_place_the_moment_is_not_what_it_asks_about():
    """"The place name while a STAMP number was displayed": written on another line than the STAMP number's."""
    moment = MemoryItem(1, "ultra_fine", 1628, 1630, 'On-screen text:\n'
                                                     '- "STAMP WV-7720" (centre, white letters on black)\n'
                                                     '- "ORCHARD 4" (centre, orange letters on blue)')
    q = Question("While a STAMP number was displayed, in what colour was the place name written?",
                 ("white", "green", "orange", "gray"))
    assert answer(q, [moment]).answer == "orange"


def test_a_place_shown_only_before_the_squares_is_no_confident_answer():
    """Text kind, placed by squares: the sign went as the 5 teal squares came up. Memory holds no place said with
    the squares, so the place chosen for them is a guess for the loop to check, never a sure answer."""
    sign = MemoryItem(1, "fine", 460, 470, 'Scenes:\n- mostly gray background\nOn-screen text:\n- "MEADOW3" (centre, '
                                           'pink letters on gray)\n- "STAMP CT-5586" (centre)\nObjects: 1 white square')
    squares = MemoryItem(2, "fine", 470, 480, 'Scenes:\n- mostly gray background\nObjects: 5 teal squares (top '
                                              'right); 1 white square (bottom left)')
    later = MemoryItem(3, "fine", 520, 530, 'On-screen text:\n- "ORCHARD 4" (centre, white letters on brown)\n'
                                            'Objects: 1 white square (bottom left)')
    q = Question("Next to the 5 teal squares, what place name could be read?",
                 ("MEADOW 3", "ORCHARD 4", "CHAPEL 11", "PAVILION 6"))
    assert not answer(q, [sign, squares, later]).confident


def test_the_ground_letters_are_written_on_is_not_their_colour():
    """"orange letters on blue" on a blue scene: blue is said in every memory around the moment, but only ever of
    the ground; the place name is written in orange."""
    def moment(ref, start, end, text):
        return MemoryItem(ref, "ultra_fine", start, end, "Scenes:\n- mostly blue background (colours: blue 98%)\n"
                                                         "On-screen text:\n" + text)
    memory = [moment(1, 1624, 1626, '- "CAM 8 PARK" (bottom right, white letters on blue)'),
              moment(2, 1626, 1628, '- "CAM 8 PARK" (bottom right, white letters on blue)'),
              moment(3, 1628, 1630, '- "ORCHARD 4" (centre, orange letters on blue)\n- "STAMP WV-7720" (centre)\n'
                                    '- "CAM 8 PARK" (bottom right, white letters on blue)'),
              moment(4, 1630, 1632, '- "ORCHARD 4" (centre, orange letters on blue)\n- "STAMP WV-7720" (centre)')]
    q = Question("While a STAMP number was displayed, in what colour was the place name written?",
                 ("green", "orange", "gray", "blue"))
    assert answer(q, memory).answer == "orange"


def test_an_answer_from_a_moment_that_lacks_part_of_the_question_is_not_sure():
    """Purple squares were seen on a green scene; the question asks about those seen as the scene turned orange,
    a moment memory has not made out yet. The corner of the green scene's squares is a guess to check."""
    green = MemoryItem(1, "coarse", 1380, 1440, "Scenes:\n- 1426.0-1430.0 s: mostly green background\n"
                                                "Objects: 2 purple squares (bottom left, 1430.0 s)")
    orange = MemoryItem(2, "coarse", 600, 660, "Scenes:\n- 600.0-602.0 s: mostly orange background\n"
                                               'On-screen text:\n- "MEADOW3" (centre, seen 600.0 s)')
    q = Question("Where did the purple squares sit during the orange background?",
                 ("bottom left", "top right", "top left", "bottom right"))
    reply = answer(q, [green, orange])
    assert not reply.confident and "not about what was asked" in reply.reason


def test_what_is_asked_is_read_at_the_time_the_question_gives():
    """"The background while a sign said DIMMED": the sign was read at 3249 s, when the picture was orange; the
    rest of the caption's ten seconds was brown, behind the camera's name and its white square."""
    scenes = ("Scenes:\n- {a}-3248.0 s: mostly brown background (colours: brown 99%)\n"
              "- scene change at about 3249.0 s\n"
              "- 3249.0{b} s: mostly orange background (colours: orange 91%)\n"
              "On-screen text:\n- \"CAM 8 PARK\" (bottom "
              "right, white letters on brown, seen {a}-3248.0 s)\n- \"FORGE8\" (centre, green letters on orange, seen "
              "3249.0{b} s)\n- \"BASKET ZK-1676\" (centre, white letters on black, seen 3249.0{b} s)\n- \"DIMMED\" "
              "(bottom centre, white letters on black, seen 3249.0{b} s)\nObjects: 1 white square (bottom left, "
              "{a}-3249.0 s); 3 teal squares (top left, 3249.0{b} s)")
    memory = [MemoryItem(1, "fine", 3240, 3250, scenes.format(a="3240.0", b="")),
              MemoryItem(2, "ultra_fine", 3248, 3250, scenes.format(a="3248.0", b="-3249.5"))]
    q = Question("During the DIMMED notice, which background colour was there?", ("red", "purple", "orange", "brown"))
    reply = answer(q, memory)
    assert reply.answer == "orange" and reply.confident, reply


def test_what_else_was_on_screen_as_the_moment_was_placed_is_not_what_is_asked_about():
    """The squares came up as the STAMP sign went: the white square on screen with the sign says nothing of the
    corner of the teal squares, read right after it in the same caption."""
    memory = [MemoryItem(1, "fine", 525, 535, "Scenes:\n- 525.0-534.0 s: mostly brown background "
                                              "(colours: brown 98%)\n"
                                              "On-screen text:\n- \"ORCHARD ROW\" (centre, pink letters on brown, seen "
                                              "527.0-529.0 s)\n- \"STAMP HEDGEHOG\" (centre, seen 527.0-529.0 s)\n"
                                              "Objects: 1 white square (bottom right, 525.0-529.0 s); "
                                              "5 teal squares (top right, 530.0-533.0 s)")]
    q = Question("With the STAMP code up, in which corner did the teal squares sit?",
                 ("bottom left", "top left", "bottom right", "top right"))
    assert answer(q, memory).answer == "top right"


def test_a_name_of_short_words_read_run_together_is_found_whole():
    """Text kind: OCR ran the two short words of "KILN B" into "KILNB", so neither word is found alone; the whole
    name, compared letter by letter, still picks it out from the other places."""
    memory = [MemoryItem(1, "fine", 40, 50, 'On-screen text:\n- "KILNB" (centre, white letters on black)\n'
                                            "Objects: 3 red squares (top left, 41.0-48.0 s)")]
    reply = answer(Question("Which place name was on the sign beside the 3 red squares?",
                            ("FORGE 8", "KILN B", "CHAPEL 11", "PAVILION 6")), memory)
    assert reply.answer == "KILN B" and "no memory mentions" not in reply.reason, reply


def test_a_close_look_inside_a_span_outweighs_the_span_around_it():
    """Every kind with options: the fine caption of ten seconds mixes the moment asked about with the one before;
    the ultra-fine caption inside it, about the asked moment alone, decides (VideoLucy's coarse-to-fine evidence)."""
    mixed = MemoryItem(1, "fine", 200, 210, "Scenes:\n- 200.0-209.0 s: mostly gray background\n"
                                            'On-screen text:\n- "FORGE 8" (top left, seen 206.0-209.0 s)\n'
                                            "Objects: 2 red squares (bottom left, 200.0-205.0 s); "
                                            "4 red squares (bottom right, 206.0-209.0 s)")
    close = MemoryItem(2, "ultra_fine", 206, 208, 'On-screen text:\n- "FORGE 8" (top left)\n'
                                                  "Objects: 4 red squares (bottom right)")
    reply = answer(Question("How many red squares were there with the FORGE 8 sign?", ("1", "2", "3", "4")),
                   [mixed, close])
    assert reply.answer == "4" and reply.evidence[0].start == 206, reply


def test_a_choice_that_rests_on_a_line_the_transcriber_was_unsure_of_is_not_sure():
    q = Question("Which platform did the announcer say the next train leaves from?", ("two", "four", "six"))

    def heard(sure: str) -> MemoryItem:
        return MemoryItem(2, "fine", 70, 80, f'Scenes: a grey hall. Speech heard 75.0-79.0 s{sure}: "the next train '
                                             'leaves from platform four"')

    sure = answer(q, [COARSE, heard("")])
    assert sure.option_index == 1 and sure.confident
    unsure = answer(q, [COARSE, heard(" (41% sure)")])
    assert unsure.option_index == 1 and not unsure.confident
    assert "41% sure" in unsure.reason
