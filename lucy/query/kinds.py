"""What a question asks, by its structure: a kind (count, presence, time, ...), what it is about and the period.

A question is parsed by a small explicit set of rules, one per kind (DESIGN: "question -> understood by kind"),
never by a benchmark's phrasing: "how many" asks for a count whatever follows it, a question that opens with "was",
"did" or "is" asks yes or no, "what happened" asks for a summary. Each rule names the kind it serves; the tests
(tests/query/test_kinds.py) hold phrasings of every kind, including ones no rule was written for.

What it is about is an object class when a noun of the question names one the detector knows (COCO's labels, with a
small table of everyday synonyms: "pedestrian" and "someone" are ``person``; a van, a truck and a car are one
vehicle group, because a detector names one van car and truck at once). The period is the whole stream unless the
question names one ("at the start", "in the last minute", "between 1:00 and 2:00", "after 30 seconds", "at 1:20").

Pure functions, no I/O: the operators (:mod:`lucy.query.operators`) and the engine's fast path read the result.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from lucy.perception.labels import COCO_LABELS
from lucy.perception.objects import ANIMALS, PERSON, VEHICLES


class Kind(StrEnum):
    """The kinds of question (issue 29's list); OTHER: none of the rules fits."""

    COUNT = "count"  # how many X (in total, at once, at a moment)
    PRESENCE = "presence"  # was there / did anyone / did X appear
    TIME = "time"  # when, at what time, which minute, how far in
    ORDER = "order"  # which came first, before or after
    TEXT = "text"  # what did the sign say, which number, which word
    SPEECH = "speech"  # what was said or announced
    ATTRIBUTE = "attribute"  # what colour, where in the picture, which direction
    DURATION = "duration"  # how long
    SUMMARY = "summary"  # what happened, describe, summarise
    BEYOND = "beyond"  # why, intentions, feelings: more than observations can tell
    OTHER = "other"


class CountMode(StrEnum):
    """What a count question counts."""

    TOTAL = "total"  # distinct objects over the period ("how many people walked by")
    AT_ONCE = "at_once"  # the most in view in one frame ("at once", "at most", "at the same time")
    MOMENT = "moment"  # in view at one moment ("now", "at the end", "at 1:20")


@dataclass(frozen=True, slots=True)
class Subject:
    """An object class a question is about: the noun it used and the detector labels it stands for."""

    noun: str
    name: str  # the word answers use: "person", "vehicle", "dog", "animal"
    labels: frozenset[str]


@dataclass(frozen=True, slots=True)
class Period:
    """The part of the stream a question is about, in media seconds; None for an open bound (the stream's start or
    what has been seen so far). ``moment``: one instant (``start`` == ``end``) rather than a stretch.
    ``from_end``: both bounds count back from the horizon ("the last 2 minutes": start=-120)."""

    start: float | None = None
    end: float | None = None
    moment: bool = False
    from_end: bool = False
    words: str = ""  # how the question named it ("" for the whole stream)
    share: float | None = None  # the period ends by this share of the horizon at the latest ("the start")

    @property
    def whole(self) -> bool:
        return self.start is None and self.end is None and not self.moment

    def bounds(self, horizon: float) -> tuple[float, float]:
        """``[start, end]`` clipped to ``[0, horizon]``."""
        if self.from_end:
            start = horizon + (self.start or 0.0)
            end = horizon + (self.end or 0.0)
        else:
            start = 0.0 if self.start is None else self.start
            end = horizon if self.end is None else self.end
        if self.share is not None:
            end = min(end, self.share * horizon)
        start, end = max(0.0, min(start, horizon)), max(0.0, min(end, horizon))
        return start, max(start, end)


@dataclass(frozen=True, slots=True)
class ParsedQuestion:
    """A question as the operators see it."""

    text: str
    kind: Kind
    subject: Subject | None = None
    period: Period = Period()
    count_mode: CountMode = CountMode.TOTAL
    colour: str | None = None  # a colour the question names of its subject ("a red car")
    still: bool | None = None  # True: asks about one that stopped or stayed; False: one that moved; None: either


# ------------------------------------------------------------------------------------------- subjects

_GROUPS: dict[str, tuple[str, frozenset[str]]] = {
    "person": ("person", frozenset({PERSON})),
    "vehicle": ("vehicle", VEHICLES - {"train", "boat", "airplane"}),
    "animal": ("animal", ANIMALS),
}
# Everyday nouns -> a group of _GROUPS or a COCO label. Singular forms; plurals are found by _singular.
_SYNONYMS: dict[str, str] = {
    **dict.fromkeys("person people persons pedestrian someone somebody anyone anybody everyone everybody man men "
                    "woman women child children kid kids human humans passerby passersby walker visitor guy lady "
                    "boy girl individual driver rider worker guard officer shopper tourist customer jogger "
                    "runner".split(), "person"),
    **dict.fromkeys("vehicle car van truck lorry bus suv taxi cab pickup automobile".split(), "vehicle"),
    **dict.fromkeys("bicycle bike cyclist biker".split(), "bicycle"),
    **dict.fromkeys("motorcycle motorbike scooter moped".split(), "motorcycle"),
    **dict.fromkeys("dog puppy".split(), "dog"),
    **dict.fromkeys("cat kitten".split(), "cat"),
    **dict.fromkeys("animal pet".split(), "animal"),
    **dict.fromkeys("bag backpack rucksack".split(), "backpack"),
    "handbag": "handbag", "purse": "handbag", "suitcase": "suitcase", "luggage": "suitcase",
    "umbrella": "umbrella", "bird": "bird", "horse": "horse", "bench": "bench", "chair": "chair",
    "boat": "boat", "train": "train", "airplane": "airplane", "plane": "airplane", "phone": "cell phone",
    "laptop": "laptop", "bottle": "bottle", "skateboard": "skateboard", "cow": "cow", "sheep": "sheep",
}
# Every other class the detector names is a noun of its own ("elephant", "giraffe", "traffic light"), except the
# names that in a question about video mostly mean something else: a colour ("orange squares"), a piece of clothing
# or a control ("tie", "remote", "mouse").
_AMBIGUOUS_LABELS = frozenset({"orange", "tie", "remote", "mouse", "tv", "keyboard", "book"})
_LABEL_NOUNS = {label: label for label in COCO_LABELS if " " not in label and label not in _AMBIGUOUS_LABELS}
_LABEL_PHRASES = re.compile(r"\b(" + "|".join(sorted((re.escape(x) for x in COCO_LABELS if " " in x), key=len,
                                                      reverse=True)) + r")s?\b")
_IRREGULAR = {"people": "people", "children": "children", "men": "men", "women": "women", "buses": "bus",
              "passersby": "passersby", "ladies": "lady", "puppies": "puppy", "sheep": "sheep"}
# "someone" and the like ask about a person without naming a class: they never turn a question into a count of them.
_WORD = re.compile(r"[a-z]+(?:-[a-z]+)?")


def _singular(word: str) -> str:
    word = word.replace("-", "")
    if word in _IRREGULAR or word in _SYNONYMS:
        return _IRREGULAR.get(word, word)
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("ches", "shes", "xes", "sses")):
        return word[:-2]
    if word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        return word[:-1]
    return word


def subject_of(text: str) -> Subject | None:
    """The first noun of ``text`` that names an object class a detector knows (an everyday synonym of one, or
    the class's own name: "elephant", "traffic light"), or None."""
    t = text.lower()
    if m := _LABEL_PHRASES.search(t):  # a class named in two words is named before any single word is read
        label = m[1]
        return Subject(m[0], label, frozenset({label}))
    for raw in _WORD.findall(t):
        word = _singular(raw)
        target = _SYNONYMS.get(word) or _LABEL_NOUNS.get(word)
        if target is None:
            continue
        name, labels = _GROUPS.get(target, (target, frozenset({target})))
        return Subject(raw, name, labels)
    return None


# ------------------------------------------------------------------------------------------- periods

_NUMBER_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())}
_NUMBER_WORDS.update({"a": 1, "an": 1, "half a": 0.5, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60})
_AMOUNT = r"(\d+(?:\.\d+)?|half a|an?|" + "|".join(w for w in _NUMBER_WORDS if w not in ("a", "an", "half a")) + ")"
_UNIT = r"(seconds?|secs?|s|minutes?|mins?|hours?|hrs?)"
_CLOCK = r"(\d+:\d{2}(?::\d{2})?)"
_DURATION = rf"{_AMOUNT}\s*{_UNIT}\b"
# "at the start", "at the beginning": the first minute, and no more than the first quarter of what was seen (the
# start of an 80-second clip is its first 20 seconds, not all but its last 20).
START_SECONDS = 60.0
START_SHARE = 0.25


def _amount(word: str) -> float:
    word = word.strip()
    return float(word) if word[0].isdigit() else float(_NUMBER_WORDS[word])


def _seconds(amount: str, unit: str) -> float:
    scale = 3600.0 if unit.startswith("h") else 60.0 if unit.startswith("m") else 1.0
    return _amount(amount) * scale


def clock_seconds(text: str) -> float:
    """"1:20" -> 80.0, "1:02:03" -> 3723.0."""
    parts = [float(p) for p in text.split(":")]
    total = 0.0
    for p in parts:
        total = total * 60 + p
    return total


def _time_point(text: str) -> float | None:
    """A point in media time: "1:20", "90 seconds", "2 minutes"."""
    m = re.fullmatch(_CLOCK, text.strip())
    if m:
        return clock_seconds(m[1])
    m = re.fullmatch(_DURATION, text.strip())
    if m:
        return _seconds(m[1], m[2])
    return None


_POINT = rf"(?:{_CLOCK}|{_AMOUNT}\s*{_UNIT}\b)"
# Rules for periods, most specific first; each gives (start, end, moment, from_end) from its match.
_BETWEEN = re.compile(rf"\b(?:between|from)\s+(?P<a>{_POINT})(?:\s*(?:in|into))?\s+(?:and|to|until|till)\s+"
                      rf"(?P<b>{_POINT})")
_FIRST_N = re.compile(rf"\b(?:first|opening)\s+(?:{_AMOUNT}\s+)?{_UNIT}")
_LAST_N = re.compile(rf"\b(?:last|final|past)\s+(?:{_AMOUNT}\s+)?{_UNIT}")
_AFTER = re.compile(rf"\b(?:after|since|from)\s+({_POINT})(?:\s+(?:in|into|on))?")
_BEFORE = re.compile(rf"\b(?:before|until|till|up to|by)\s+({_POINT})")
_AT = re.compile(rf"\b(?:at|around|about)\s+({_CLOCK}|{_AMOUNT}\s*{_UNIT}\s+(?:in|into))")
_START = re.compile(r"\b(?:at|in|near|during)\s+the\s+(?:very\s+)?(?:start|beginning|outset)\b|\bat first\b|"
                    r"\b(?:the\s+)?(?:first|opening|early|earliest)\s+(?:part|portion|section|stretch|bit|moments?)\b")
_FIRST_HALF = re.compile(r"\b(?:the\s+)?first\s+half\b")
_END = re.compile(r"\b(?:at|in|near|towards?|by)\s+the\s+(?:very\s+)?end\b|\bright now\b|\bnow\b|\bcurrently\b|"
                  r"\bat the moment\b|\bat present\b")


def _point_of(words: str) -> float:
    words = re.sub(r"\s*(?:in|into|on)$", "", words.strip())
    value = _time_point(words)
    if value is None:
        m = re.match(_DURATION, words)
        value = _seconds(m[1], m[2]) if m else 0.0
    return value


def period_of(text: str) -> Period:
    """The period ``text`` names (the whole stream when it names none)."""
    t = text.lower()
    if m := _BETWEEN.search(t):
        a, b = _point_of(m['a']), _point_of(m['b'])
        return Period(min(a, b), max(a, b), words=m[0])
    if m := _FIRST_N.search(t):
        n = _amount(m[1]) if m[1] else 1.0
        return Period(0.0, n * _seconds("1", m[2]), words=m[0])
    if m := _LAST_N.search(t):
        n = _amount(m[1]) if m[1] else 1.0
        return Period(-n * _seconds("1", m[2]), 0.0, from_end=True, words=m[0])
    if m := _AFTER.search(t):
        return Period(_point_of(m[1]), None, words=m[0])
    if m := _BEFORE.search(t):
        return Period(None, _point_of(m[1]), words=m[0])
    if m := _AT.search(t):
        at = _point_of(m[1])
        return Period(at, at, moment=True, words=m[0])
    if m := _FIRST_HALF.search(t):
        return Period(0.0, None, words=m[0], share=0.5)
    if m := _START.search(t):
        return Period(0.0, START_SECONDS, words=m[0], share=START_SHARE)
    if m := _END.search(t):
        return Period(0.0, 0.0, moment=True, from_end=True, words=m[0])
    return Period()


# ------------------------------------------------------------------------------------------- kinds

def _any(patterns: str) -> re.Pattern[str]:
    return re.compile(patterns)


# Each rule: the kind it serves and what marks it, checked in this order (the first that matches decides).
_SUMMARY = _any(r"\bwhat(?:'s| is| was| has)?\s+(?:been\s+)?(?:happen\w*|going on|occur\w*|taking place)\b|"
                r"\bdescribe\b|\bsummar\w*|\boverview\b|\brecap\b|\bwhat did (?:you|the camera|it) see\b|"
                r"\bwhat (?:can|do) you see\b|\bwhat(?:'s| is) (?:in|on) (?:the |this )?(?:video|stream|camera|"
                r"footage|feed)\b|\btell me (?:about|what)\b|\bgive me (?:a|an) (?:summary|rundown)\b")
# What no camera observes, by kind: causes and reasons; a mind's states (thoughts, wishes, plans, likes, beliefs);
# who owns what or whom one is to another; who someone is (a name, an age); where someone was bound or what will
# happen; judgements (legal, safe, suspicious). A question about any of them may lean on what was seen, but its
# answer is not there.
_BEYOND = _any(r"^\s*why\b|\bfor what reason\b|\bhow come\b|\bwhat (?:made|caused|makes|causes)\b|\bbecause\b|"
               r"\bintend\w*|\bintention\w*|\bfeel\w*|\bemotion\w*|\bmood\b|\bpurpose\b|\bmotive\w*|"
               r"\b(?:think|thinks|thought|thinking|want|wants|wanted|wanting|wish\w*|hope\w*|plan|plans|planned|"
               r"planning|likes|liked|love[sd]?|loving|hate[sd]?|believe[sd]?|decid\w*|prefer\w*|enjoy\w*)\b|"
               r"^\s*(?:does|did|do)\b(?!.*\b(?:looks?|looked|sounds?|sounded) like\b).*\blike\b|"
               r"\b(?:try|trying|tried) to\b|\bgoing to (?!the\b|a\b|an\b|its\b|his\b|her\b|their\b|my\b)[a-z]+|"
               r"\b(?:owns|owned|owner\w*|ownership|belong\w*|whose)\b|\b(?:friends?|married|related|relatives?|"
               r"husband|wife|boss)\b|"
               r"\b(?:his|her|their) names?\b|\bname of (?:the|that|this) (?:man|woman|person|driver|cyclist|rider|"
               r"boy|girl|child|kid)\b|\bhow old\b|"
               r"\bwhere (?:was|were|is|are)\b.*\b(?:going|headed|heading|bound)\b|"
               r"\bwhat will\b|\bwill (?:he|she|they|it)\b|"
               r"\b(?:legal\w*|illegal\w*|allowed|permitted|safe|unsafe|dangerous|suspicious\w*)\b")
_DURATION_Q = _any(r"\bhow long\b|\bfor how (?:many|much) (?:seconds|minutes|hours|time)\b|\bduration\b|"
                   r"\bhow much time\b")
# "the number of dogs" counts; "the plate number of the van" names a text (a noun before "number").
_EXTREME = r"(?:most|maximum|max|fewest|least|minimum|min|largest|biggest|greatest|highest|smallest|lowest)"
_COUNT = _any(r"\bhow many\b|(?:^|\b(?:the|a|total|what|whats|what's)\s+)(?:" + _EXTREME + r"\s+|overall\s+|"
              r"exact\s+)?number of\b|\bcount\b|\bhow much\b|\b(?:what|the|a) total (?:of|number)\b|"
              r"\bwhat (?:is|was|were) the " + _EXTREME + r"\b")
_ORDER = _any(r"\b(?:came|come|appeared|appear|happened|showed up|arrived|shown|seen|first)\b.*\bor\b|"
              r"\bwhich\b.*\b(?:first|earlier|later|last|before|after)\b|\bin what order\b|\border\b|"
              r"^\s*(?:did|was|were|does|is)\b.*\b(?:before|after)\s+(?:the|a|an|it|they|he|she)\b")
_TIME = _any(r"^\s*when\b|\bwhen (?:did|was|were|does|is)\b|\bwhat time\b|\bat what (?:point|moment|second|"
             r"minute)\b|\bwhich (?:minute|second|moment|part of the video)\b|\bhow far (?:in|into)\b|"
             r"\bhow soon\b|\bhow many (?:seconds|minutes) (?:in|into)\b|\btimestamp\b")
_TEXT = _any(r"\b(?:sign|signs|banner|board|screen|display|label|caption|plate|placard|poster|notice|text|"
             r"written|writing|printed|lettering|letters|word|words|code|message)\b.*\b(?:say|said|says|read|"
             r"reads|show|showed|shows|display\w*|spell\w*|written)\b|\bwhat (?:was|is) (?:written|printed)\b|"
             r"\b(?:which|what) (?:word|number|code|name|text)\b|\bread\b|"
             r"\bwhat (?:was|is|were) (?:the )?(?:text|writing|wording|message|number|code)\b")
_SPEECH = _any(r"\b(?:said|say|says|saying|announce\w*|spoke|spoken|speak\w*|talk\w*|heard|hear|mention\w*|"
               r"voice|shout\w*|called out)\b")
_ATTRIBUTE = _any(r"\b(?:what|which) colou?r\b|\bcolou?r of\b|\bwhere (?:in|on) the (?:picture|frame|screen|"
                  r"image|view)\b|\b(?:which|what) (?:side|corner|direction|way|part of the (?:picture|frame|"
                  r"screen))\b|\bwhere did\b.*\b(?:go|come from|enter|leave|stand|park|stop)\b|\bwhat shape\b|"
                  r"\bhow (?:big|large|tall)\b|\bwhat size\b|\bwhat (?:was|were|is|are) .* wearing\b")
_YES_NO = _any(r"^\s*(?:was|were|is|are|did|does|do|has|have|had|can|could|will|would)\b|"
               r"^\s*(?:any|anyone|anybody|someone|somebody)\b|\bany\b.*\?\s*$")
# "Which gate is closed?", "What platform does the shuttle leave from?": a wh-word asking which one of a thing that is
# no object class the detector knows (the rule is checked last, and only then): what tells one from another on
# screen is what is written on it, so it is a text question.
_WHICH_THING = _any(r"^\s*(?:which|what)\s+(?P<noun>[a-z]+)\s+(?:is|was|were|are|has|had|does|did|do|will|can)\b")
_AT_ONCE = _any(r"\bat once\b|\bat (?:the )?most\b|\bat the same time\b|\bsimultaneously\b|\bmaximum\b|"
                r"\bmax\b|\bat a time\b|\bat one time\b|\bin one frame\b|\bpeak\b|\bmost\b|\btogether\b|"
                r"\b(?:largest|biggest|greatest|highest) (?:number|count|crowd|group)\b")
_STILL = _any(r"\b(?:stop|stopped|stops|park|parked|parks|wait|waited|waiting|stand|stood|standing|stay|stayed|"
              r"staying|sit|sat|sitting|remain\w*|idle)\b")
_MOVING = _any(r"\b(?:walk\w*|drove|drive\w*|pass\w*|cross\w*|ran|run\w*|go(?:es|ne)?|went|move[ds]?|moving|"
               r"enter\w*|leave|left|arriv\w*|came|come|through|by)\b")
_COLOURS = ("red", "orange", "yellow", "green", "blue", "purple", "pink", "brown", "black", "white", "gray", "grey",
            "silver")


# "Are the people in the square late?", "Is the driver lost?": a yes-or-no question that says what a thing *is*
# (a copula, then the thing, then what is said of it) asks about a state the detector observes only when what is said
# of it can be seen: being there or in view, a place, a colour, a way of moving or standing (any "-ing" word), a
# size. Anything else (late, lost, angry, married) is beyond the observations.
_COPULA_Q = _any(r"^\s*(?:is|are|was|were)\s+(?!there\b|it\b|this\b|that\b|anything\b|something\b)(?P<rest>.+)$")
_PLACE_PHRASE = re.compile(r"^(?:in|on|at|near|by|inside|outside|behind|under|across|beside|next to|in front of)\s+"
                           r"(?:the\s+|a\s+|an\s+|this\s+|that\s+)?[a-z]+(?:\s+(?:area|side|corner|lane|part))?\s*")
_SEEN_STATE = _any(r"\b(?:visible|seen|shown|present|there|here|around|in (?:view|frame|shot|sight|the (?:picture|"
                   r"frame|image|video|scene))|on (?:screen|camera|(?:the )?(?:left|right))|(?!\w*thing\b)\w+ing|"
                   r"moving|still|parked|gone|left|right|top|bottom|middle|centre|center|inside|outside|alone|"
                   r"together|open|closed|shut|"
                   r"empty|full|big|small|large|little|tall|short|wide|long|dressed|wearing|carrying|holding|"
                   r"red|orange|yellow|green|blue|purple|pink|brown|black|white|gr[ae]y|silver|dark|light|"
                   r"one|two|three|four|five|\d+|more|fewer|any|many|several)\b")


def _beyond_observation(t: str) -> bool:
    """Whether ``t``, a yes-or-no question, says of an object class something no detector observes (see
    :data:`_COPULA_Q`)."""
    m = _COPULA_Q.search(t.rstrip("?. "))
    subject = subject_of(m["rest"]) if m else None
    if m is None or subject is None or subject.noun not in m["rest"]:
        return False
    said = m["rest"].split(subject.noun, 1)[1].strip()
    while (place := _PLACE_PHRASE.match(said)) and place.end():
        said = said[place.end():]
    return bool(said) and not _SEEN_STATE.search(said)


def kind_of(text: str) -> Kind:
    """The kind of question ``text`` is (:class:`Kind`), by the first rule that matches."""
    t = " ".join(text.lower().split())
    for kind, rule in ((Kind.SUMMARY, _SUMMARY), (Kind.BEYOND, _BEYOND), (Kind.DURATION, _DURATION_Q),
                       (Kind.TIME, _TIME), (Kind.COUNT, _COUNT), (Kind.ORDER, _ORDER), (Kind.TEXT, _TEXT),
                       (Kind.SPEECH, _SPEECH), (Kind.ATTRIBUTE, _ATTRIBUTE), (Kind.PRESENCE, _YES_NO)):
        if rule.search(t):
            return Kind.BEYOND if kind is Kind.PRESENCE and _beyond_observation(t) else kind
    m = _WHICH_THING.search(t)
    if m and subject_of(m["noun"]) is None and m["noun"] not in ("time", "day", "thing", "one"):
        return Kind.TEXT
    return Kind.OTHER


_FIRST_ASKED = _any(r"\b(?:first|earliest|initially)\b")


def asks_first(question: ParsedQuestion) -> bool:
    """Whether a time question asks for the first time something happened ("when did the first van arrive")."""
    return question.kind is Kind.TIME and bool(_FIRST_ASKED.search(question.text.lower()))


def parse(text: str) -> ParsedQuestion:
    """``text`` parsed into its kind, subject, period and the details a count or presence operator needs."""
    kind = kind_of(text)
    t = " ".join(text.lower().split())
    period = period_of(t)
    subject = subject_of(t)
    mode = CountMode.TOTAL
    if kind is Kind.COUNT:
        if _AT_ONCE.search(t):
            mode = CountMode.AT_ONCE
        elif period.moment:
            mode = CountMode.MOMENT
        elif re.search(r"\b(?:are|is) (?:there|in view|visible|on screen)\b", t) and period.whole:
            mode = CountMode.MOMENT  # "how many people are there?" asks about now
            period = Period(0.0, 0.0, moment=True, from_end=True, words="now")
    colour = None
    if subject is not None:
        before = t.split(subject.noun, 1)[0].split()[-3:]  # "a red car", "anyone in a blue coat" (after) is not it
        colour = next((("gray" if w == "grey" else w) for w in before if w in _COLOURS), None)
    rest = t.split(subject.noun, 1)[1] if subject is not None and subject.noun in t else t
    still = True if _STILL.search(rest) else (False if _MOVING.search(rest) else None)
    return ParsedQuestion(text=text, kind=kind, subject=subject, period=period, count_mode=mode, colour=colour,
                          still=still)
