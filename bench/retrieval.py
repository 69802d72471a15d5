"""Memory search by meaning: does hybrid search find paraphrases that full-text search cannot, and is it fast enough?

(a) Paraphrase retrieval. Memory holds captions written the way Lucy's captioners write them (scenes, people,
signs, colours, vehicles, "Speech heard ..." lines) among ``--haystack`` generated captions of the same kind, so
that top-1 means something. Each query names its target caption without one content word in common (checked with
:func:`lucy.query.text.terms`, the reasoner's own normalisation). The pairs are split in two: ``tune`` (what any
choice here was looked at against) and ``test`` (never used to choose anything); both are reported. Printed: top-1
and top-3 of full-text only, vector only and hybrid; vector only by each of the local embedder's two models alone
(for comparison; the embedder uses both); and whether storing vectors as float16 would change a top-1.

(b) Latency. A synthetic 24-hour memory (1,440 coarse, 8,640 fine, ~1,000 ultra_fine nodes of caption-like text)
in a temporary SQLite store: embedding it all once (nodes/s), then p50/p95 of 200 searches, full-text only (the
baseline, measured in the same run) and hybrid, in ms and as a ratio to the baseline.

Targets: hybrid-or-vector top-1 >= 90 % on both halves with the local embedder; hybrid p95 <= 50 ms. Exit status 0
when every target is met.

    .venv/bin/python bench/retrieval.py [--threads 1] [--haystack 300] [--queries 200]
    .venv/bin/python bench/retrieval.py --embed-sample 1000   # quicker: embed 1,000 nodes, reuse their vectors
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from lucy.config.settings import LocalEmbedderSettings
from lucy.memory.embedders.local import LocalEmbedder
from lucy.memory.nodes import MemoryNode
from lucy.memory.retrieval import MemoryIndex
from lucy.memory.sqlite_store import SQLiteMemoryStore
from lucy.query.text import terms

TOP1_TARGET = 0.90
P95_TARGET_MS = 50.0

# (target caption, query with no content word in common). Alternating tune / test.
PAIRS: list[tuple[str, str]] = [
    ("A woman standing at the desk hands a key card to a guest in the hotel lobby.",
     "the lady at the reception counter giving someone their room pass"),
    ("A red delivery van is parked outside the entrance while a man unloads cardboard boxes.",
     "courier truck stopped by the front door with parcels being carried off"),
    ("Two children kick a football across the grass in a park.", "kids playing soccer on a lawn"),
    ("Speech heard: 'the train to Boston leaves from platform four'.",
     "which track does the Massachusetts rail service depart from"),
    ("A black cat sleeps on a windowsill next to a potted plant.", "kitty napping by the glass beside some greenery"),
    ("A sign reading NO PARKING is fixed to a lamp post on the corner.",
     "notice forbidding leaving vehicles, mounted on a streetlight"),
    ("A man in a yellow raincoat walks a dog along the beach.", ("someone wearing a bright waterproof jacket strolling "
                                                                 "with their pet on the seashore")),
    ("Smoke rises from the kitchen stove; a pan is on fire.", "flames coming out of a frying dish while cooking"),
    ("A cyclist in a blue helmet rides past the bakery.", "a person on a bike wearing headgear goes by the bread shop"),
    ("An elderly couple sits on a bench feeding pigeons.", "old pair on a seat giving crumbs to birds"),
    ("A white ambulance with flashing lights stops at the intersection.",
     "emergency medical vehicle with sirens halting at the crossroads"),
    ("Speech heard: 'please remember to lock the back door tonight'.",
     "someone asked that the rear exit be secured this evening"),
    ("A waiter pours red wine into glasses at a restaurant table.", "server filling goblets with merlot while diners eat"),
    ("Snow covers the parked cars and the pavement is icy.", ("vehicles blanketed in white after a blizzard, slippery "
                                                             "sidewalk")),
    ("A forklift moves pallets of crates in the warehouse.", "lift truck carrying loads around the storage depot"),
    ("A teenager is skateboarding down the stairs of the plaza.", "a youth riding a board down steps in the square"),
    ("A doctor in a white coat examines an x-ray on a light box.", "physician studying a radiograph"),
    ("Speech heard: 'the meeting has been moved to three o'clock'.", "appointment rescheduled for the afternoon, 15:00"),
    ("A crowd waves flags and cheers in the stadium.", "fans celebrating with banners at the arena"),
    ("A mechanic repairs the engine of a car in a garage.", "technician fixing a motor in an auto workshop"),
    ("A girl reads a book under a tree in the garden.", "young lady enjoying a novel beneath an oak in the yard"),
    ("Two police officers question a driver beside a silver sedan.",
     "cops interviewing a motorist next to a grey saloon"),
    ("A baby cries in a pram while its mother pushes it.", "infant wailing in a stroller as mum walks"),
    ("Speech heard: 'I lost my wallet somewhere on the bus'.", "a passenger misplaced their purse during the ride"),
    ("A fisherman casts a line from the end of the pier.", "angler throwing a hook off the jetty"),
    ("The shop shutters are down and the street is deserted.", "stores closed, nobody around on the road"),
    ("A chef chops onions on a wooden board.", "cook slicing vegetables with a knife"),
    ("A helicopter hovers over the river.", "chopper flying above the water"),
    ("A man in a suit checks his watch at the bus stop.", "businessman looking at the time while waiting for a coach"),
    ("Speech heard: 'the fire alarm will be tested at noon'.", "warning bell trial scheduled for midday"),
    ("A nurse pushes a patient in a wheelchair down the corridor.",
     "hospital carer wheeling someone along the hallway"),
    ("A pickup truck tows a small boat on a trailer.", "ute hauling a dinghy"),
    ("Students sit at desks while a teacher writes on the blackboard.",
     "pupils in class as the instructor scribbles on the chalkboard"),
    ("A toddler spills orange juice on the kitchen floor.", "little kid knocks over a drink onto the tiles"),
    ("A security guard checks badges at the gate.", "watchman verifying passes at the entry barrier"),
    ("Speech heard: 'could you turn the music down please'.", "request to lower the volume of the songs"),
    ("A woman jogs along the riverside path at sunrise.", "lady running by the stream early in the morning"),
    ("Fireworks explode over the harbour at midnight.", "pyrotechnics bursting above the port late at night"),
    ("A man repairs a bicycle tyre on the pavement.", "someone fixing a flat on a bike on the sidewalk"),
    ("A queue of people waits outside the cinema.", "line of moviegoers at the film theatre"),
    ("A green tractor ploughs the field.", "farm machine tilling farmland"),
    ("Speech heard: 'the flight to Madrid is delayed by two hours'.", "plane bound for Spain's capital running late"),
    ("A plumber fixes a leaking pipe under the sink.", "tradesman mending dripping plumbing beneath the basin"),
    ("A boy climbs a ladder to rescue a kite from a roof.", ("kid going up steps to fetch his toy stuck on top of "
                                                            "the house")),
    ("A bride and groom cut a wedding cake.", "newlyweds slicing their marriage dessert"),
    ("A lorry overturned on the motorway; traffic is stopped.", "truck flipped on the highway, jam"),
    ("A postman puts letters into a mailbox.", "mail carrier delivering post"),
    ("Speech heard: 'everyone please evacuate the building now'.", "order to leave the premises immediately"),
    ("A man paints a fence white in the backyard.", ("someone coating a wooden barrier in a pale colour behind his "
                                                    "house")),
    ("A goalkeeper dives and saves a penalty.", "keeper stops a spot kick"),
    ("A bus full of tourists arrives at the museum.", "coach of sightseers pulling up at the gallery"),
    ("A street musician plays the violin for coins.", "busker fiddling for spare change"),
    ("A woman buys apples at a market stall.", "lady purchasing fruit from a vendor"),
    ("Speech heard: 'the printer on the second floor is jammed again'.", "upstairs copier stuck once more"),
    ("A puddle reflects the neon lights of a bar at night.", "glowing pub signs mirrored in rainwater after dark"),
    ("A waiter drops a tray of glasses.", "server loses grip on drinks which fall"),
    ("Two dogs chase each other around the fountain.", "pair of hounds running circles near the water feature"),
    ("Speech heard: 'happy birthday, we got you a surprise'.", ("celebration of someone turning a year older, "
                                                               "with a gift")),
]

_PLACES = ["hotel lobby", "car park", "office corridor", "shop floor", "loading bay", "station concourse",
           "apartment hallway", "school yard", "petrol station forecourt", "café terrace", "underground garage",
           "library reading room", "hospital waiting area", "gym", "supermarket aisle"]
_WHO = ["a man in a grey hoodie", "two women with shopping bags", "a courier in an orange vest",
        "a group of three teenagers", "an elderly man with a cane", "a woman in a green dress", "a security guard",
        "a cleaner with a mop", "a couple holding hands", "a boy on a scooter", "a man carrying a ladder",
        "a woman pushing a trolley"]
_DOING = ["walks past", "stands near", "waits beside", "looks at", "talks on a phone next to", "sits close to",
          "hurries towards", "stops in front of"]
_THINGS = ["a vending machine", "a row of lockers", "a noticeboard", "the lift doors", "a stack of chairs",
           "a blue recycling bin", "a red fire extinguisher", "a large potted palm", "a revolving door",
           "a ticket machine", "a coffee counter", "a parked motorbike", "a map of the building"]
_SIGNS = ["EXIT", "OPEN 24 HOURS", "STAFF ONLY", "WET FLOOR", "SALE 50%", "PLATFORM 2", "LEVEL -1", "TOILETS",
          "CCTV IN OPERATION", "KEEP LEFT"]
_LIGHT = ["The lighting is dim.", "Bright daylight comes through the windows.", "Fluorescent lights flicker.",
          "It is raining outside.", "The floor is shiny and wet.", "Music plays faintly."]
_SPEECH = ["'see you tomorrow then'", "'is this the right way to the exit'", "'can I have a receipt'",
           "'hold the door please'", "'we close in ten minutes'", "'has anyone seen my keys'"]


def haystack_caption(rng: random.Random, long: bool = False) -> str:
    """One generated caption, in the captioners' style (these are the distractors)."""
    if rng.random() < 0.12:
        return f"Speech heard: {rng.choice(_SPEECH)}."
    parts = [f"In the {rng.choice(_PLACES)}, {rng.choice(_WHO)} {rng.choice(_DOING)} {rng.choice(_THINGS)}.",
             f"A sign reads '{rng.choice(_SIGNS)}'."]
    if long:
        parts += [f"Then {rng.choice(_WHO)} {rng.choice(_DOING)} {rng.choice(_THINGS)}.", rng.choice(_LIGHT)]
    return " ".join(parts)


def check_pairs() -> None:
    """Each query shares no content word (by the reasoner's normalisation) with its target: words alone cannot
    find it."""
    for caption, query in PAIRS:
        shared = set(terms(caption)) & set(terms(query))
        if shared:
            raise SystemExit(f"query {query!r} shares {sorted(shared)} with its target {caption!r}")


def top_k(rank: Callable[[str], list[int]], queries: list[tuple[int, str]]) -> tuple[float, float]:
    hits1 = hits3 = 0
    for target, query in queries:
        ids = rank(query)
        hits1 += bool(ids[:1] == [target])
        hits3 += target in ids[:3]
    return hits1 / len(queries), hits3 / len(queries)


def paraphrases(embedder: LocalEmbedder, alone: list[LocalEmbedder], haystack: int, seed: int) -> bool:
    check_pairs()
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="lucy-retrieval-") as tmp:
        store = SQLiteMemoryStore(Path(tmp) / "memory.sqlite")
        texts = [c for c, _ in PAIRS] + [haystack_caption(rng, rng.random() < 0.5) for _ in range(haystack)]
        order = list(range(len(texts)))
        rng.shuffle(order)  # targets scattered among the distractors in time
        nodes = [MemoryNode(stream="bench", level="coarse", start=60.0 * slot, end=60.0 * slot + 60, text=texts[i])
                 for slot, i in enumerate(order)]
        stored = {n.text: n for n in store.add_many(nodes)}
        target_ids = [stored[c].id for c, _ in PAIRS]
        words = MemoryIndex(store, None)
        hybrid = MemoryIndex(store, embedder)
        hybrid.search("bench", "warm up")  # embeds every node once
        all_nodes = store.nodes("bench")
        matrix = hybrid.vectors_for(all_nodes)
        assert matrix is not None
        ids = np.array([n.id for n in all_nodes])
        half = matrix.astype(np.float16).astype(np.float32)

        def cosine_rank(query: str, m: np.ndarray) -> list[int]:  # plain cosine: for the storage check alone
            return [int(i) for i in ids[np.argsort(-(m @ embedder.embed_query(query)))[:3]]]

        def vector_rank(index: MemoryIndex) -> Callable[[str], list[int]]:
            def rank(query: str) -> list[int]:  # as the reasoner ranks: similarity from the stream's centre
                scores = index.similarities(query, all_nodes)
                assert scores is not None
                return [int(i) for i in ids[np.argsort(-scores)[:3]]]
            return rank

        methods: dict[str, Callable[[str], list[int]]] = {
            "full-text only": lambda q: [h.node.id for h in words.search("bench", q, limit=3)],
            "vector only": vector_rank(hybrid),
            "hybrid": lambda q: [h.node.id for h in hybrid.search("bench", q, limit=3)],
        }
        for model in alone:  # vector only, by each of the local embedder's models alone (for comparison)
            methods[f"  {model.settings.models[0]} alone"] = vector_rank(MemoryIndex(store, model))
        splits = {"tune": [(target_ids[i], PAIRS[i][1]) for i in range(0, len(PAIRS), 2)],
                  "test": [(target_ids[i], PAIRS[i][1]) for i in range(1, len(PAIRS), 2)]}
        print(f"(a) paraphrase retrieval: {len(PAIRS)} queries ({len(splits['tune'])} tune, {len(splits['test'])} "
              f"test) among {len(nodes)} captions ({haystack} generated distractors); local embedder "
              f"{embedder.model}")
        print(f"    {'method':<16} {'tune top-1':>10} {'tune top-3':>10} {'test top-1':>10} {'test top-3':>10}")
        best = {}
        for name, rank in methods.items():
            scores = {split: top_k(rank, queries) for split, queries in splits.items()}
            print(f"    {name:<16} " + " ".join(f"{scores[s][k]:>10.1%}" for s in splits for k in (0, 1)))
            best[name] = scores
        changed = sum(cosine_rank(q, matrix)[:1] != cosine_rank(q, half)[:1] for _, q in PAIRS)
        print(f"    float16 storage: {changed} of {len(PAIRS)} top-1 results would change "
              f"(max |delta| of a vector component {np.abs(half - matrix).max():.1e}); vectors are kept float32")
        store.close()
    ok = all(max(best["hybrid"][s][0], best["vector only"][s][0]) >= TOP1_TARGET for s in splits)
    print(f"    target: hybrid-or-vector top-1 >= {TOP1_TARGET:.0%} on tune and test: {'PASS' if ok else 'FAIL'}")
    return ok


_FINE = ["{who} {doing} {thing}.", "Close-up: {who} {doing} {thing}; a sign reads '{sign}'.",
         "{who} {doing} {thing}. {light}"]


def day_of_memory(store: SQLiteMemoryStore, rng: random.Random, ultra_fine: int) -> int:
    """1,440 coarse spans of 60 s, 6 fine spans of 10 s each, and ``ultra_fine`` 2-second spans here and there."""
    nodes: list[MemoryNode] = []
    for k in range(1440):
        t = 60.0 * k
        nodes.append(MemoryNode(stream="day", level="coarse", start=t, end=t + 60, text=haystack_caption(rng, True)))
        for j in range(6):
            text = rng.choice(_FINE).format(who=rng.choice(_WHO).capitalize(), doing=rng.choice(_DOING),
                                            thing=rng.choice(_THINGS), sign=rng.choice(_SIGNS),
                                            light=rng.choice(_LIGHT))
            nodes.append(MemoryNode(stream="day", level="fine", start=t + 10 * j, end=t + 10 * j + 10, text=text))
    for t in sorted(rng.sample(range(0, 86_400, 2), ultra_fine)):
        nodes.append(MemoryNode(stream="day", level="ultra_fine", start=float(t), end=t + 2.0,
                                text=f"{rng.choice(_WHO).capitalize()} {rng.choice(_DOING)} {rng.choice(_THINGS)}."))
    for at in range(0, len(nodes), 2000):
        store.add_many(nodes[at:at + 2000])
    return len(nodes)


def percentiles(samples: list[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return cuts[49] * 1000, cuts[94] * 1000


def latency(embedder: LocalEmbedder, queries: int, ultra_fine: int, embed_sample: int, seed: int) -> bool:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="lucy-retrieval-") as tmp:
        store = SQLiteMemoryStore(Path(tmp) / "memory.sqlite")
        count = day_of_memory(store, rng, ultra_fine)
        nodes = store.nodes("day")
        index = MemoryIndex(store, embedder)
        sample = nodes if not embed_sample or embed_sample >= len(nodes) else rng.sample(nodes, embed_sample)
        began = time.perf_counter()
        index.embed_new(sample)
        seconds = time.perf_counter() - began
        print(f"(b) latency: a 24-hour memory of {count} nodes (1,440 coarse, 8,640 fine, {ultra_fine} ultra_fine)")
        print(f"    embedding {len(sample)} nodes once: {seconds:.1f} s, {len(sample) / seconds:.0f} nodes/s "
              f"({embedder.settings.threads} threads)")
        if len(sample) < len(nodes):  # --embed-sample: the others get copies of the sample's vectors
            made = store.vectors(embedder.model, [n.id for n in sample])
            pool = list(made.values())
            store.put_vectors(embedder.model, {n.id: pool[i % len(pool)] for i, n in enumerate(nodes)
                                               if n.id not in made})
            print(f"    notice: --embed-sample {embed_sample}: the other {len(nodes) - len(sample)} nodes were given "
                  f"copies of those vectors (latency is the same; the embedding time above is for the sample)")
        began = time.perf_counter()
        index.search("day", "warm up")  # the stream's matrix is read from the store once
        print(f"    first hybrid search (reads every stored vector): {(time.perf_counter() - began) * 1000:.0f} ms")
        words = MemoryIndex(store, None)
        texts = [f"{rng.choice(['where is', 'when did', 'was there', 'who'])} {rng.choice(_WHO)} near "
                 f"{rng.choice(_THINGS)} {rng.choice(['', 'in the ' + rng.choice(_PLACES)])}".strip()
                 for _ in range(queries)]
        timings: dict[str, list[float]] = {"full-text only": [], "hybrid": []}
        for i, text in enumerate(texts):
            level = [None, "coarse", "fine"][i % 3]
            for name, idx in (("full-text only", words), ("hybrid", index)):
                began = time.perf_counter()
                idx.search("day", text, level=level, limit=20)
                timings[name].append(time.perf_counter() - began)
        base50, base95 = percentiles(timings["full-text only"])
        print(f"    {'search':<16} {'p50 ms':>8} {'p95 ms':>8} {'p50 x':>7} {'p95 x':>7}   ({queries} queries; "
              f"every hybrid query embedded anew)")
        for name, samples in timings.items():
            p50, p95 = percentiles(samples)
            print(f"    {name:<16} {p50:>8.1f} {p95:>8.1f} {p50 / base50:>7.2f} {p95 / base95:>7.2f}")
        store.close()
    p95 = percentiles(timings["hybrid"])[1]
    ok = p95 <= P95_TARGET_MS
    print(f"    target: hybrid p95 <= {P95_TARGET_MS:g} ms: {'PASS' if ok else 'FAIL'} ({p95:.1f} ms)")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1, help="local embedder threads (embedder.local.threads)")
    parser.add_argument("--haystack", type=int, default=300, help="generated distractor captions in (a)")
    parser.add_argument("--queries", type=int, default=200, help="timed searches in (b)")
    parser.add_argument("--ultra-fine", type=int, default=1000, help="ultra_fine nodes in the 24-hour memory")
    parser.add_argument("--embed-sample", type=int, default=0,
                        help="(b) embed only this many nodes and reuse their vectors for the rest (0: embed all)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--skip-latency", action="store_true")
    args = parser.parse_args()
    embedder = LocalEmbedder(LocalEmbedderSettings(threads=args.threads))
    models = embedder.settings.models
    alone = [LocalEmbedder(LocalEmbedderSettings(models=[m], threads=args.threads)) for m in models] \
        if len(models) > 1 else []
    ok = paraphrases(embedder, alone, args.haystack, args.seed)
    for model in alone:
        model.close()
    if not args.skip_latency:
        ok = latency(embedder, args.queries, args.ultra_fine, args.embed_sample, args.seed) and ok
    embedder.close()
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
