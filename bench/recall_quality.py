#!/usr/bin/python3
"""bench/recall_quality.py: how well memoryd's text recall finds the turn that
answers a question, for lexical search alone, vector search alone (the
embedder contract stand-in) and hybrid, beside a textbook Okapi BM25
computed here over the same corpus. The measuring side of
bench/recall_quality.sh, which starts the servers.

The corpus (built here, from a fixed seed: no network, no data files)
---------------------------------------------------------------------
Multi-session dialogues between two people, in the shape of long-term
conversational memory sets (LoCoMo and the like): BENCH turns / 200
dialogues of 10 sessions x 20 turns each (50 x 10 x 20 = 10,000 turns at
the default size). Every turn is stored as one point whose text is
"Speaker: what they said", e.g. "Ana: We finally adopted a beagle puppy
last March! We named him Rufus."

- Speakers: 100 people for 50 dialogues, drawn from 60 first names, so a
  name can recur in two dialogues (two different Anas). Pets, teachers,
  partners and babies take names from pools apart from the speakers'.
- Facts: 20 kinds of personal fact (a dog or a cat adopted, a new job, a
  trip, painting, an instrument and its teacher, a language, a move, a race,
  a book, a baby in the family, an injury, volunteering, a car, a concert, a
  dish cooked, a degree, a birthday, an allergy, a garden, a wedding), each
  with 2-4 wordings of its evidence turn and 3-5 question wordings, filled
  from slot pools (breeds, companies, cities, months, relative dates such as
  "last March" or "this past spring"...). Some evidence turns are said by
  the other speaker about the subject ("Congrats on the nurse position at
  Helix Labs, Ana!"). A speaker has at most one fact of a kind in the whole
  corpus (so every question has one right answer), and each dialogue gets
  as many unasked facts as asked ones: they are distractors of the same
  shape.
- Questions: one per asked fact, in the third person, as an agent would ask
  its memory ("What breed of dog did Ana adopt?" for the turn above). A
  question shares only some words with its evidence turn, often with another
  inflection (adopt/adopted, paint/painting, hired/hire) or none of the
  content words but the name and one more ("Where is Ana going to work?"
  against "...I accepted an offer as a nurse at Helix Labs..."): 1-2 shared
  content words make a hard question, 3+ an easier one. The subject's name
  reaches the evidence turn through the speaker prefix, or in the text when
  the other speaker says it.
- Distractors: besides the unasked facts, every asked or unasked fact gets
  1-2 follow-up turns in later sessions that share its topic words but not
  its answer ("The puppy chewed through another pair of my shoes."); about
  40% of the remaining turns are topical chatter from the same slot pools
  that states no fact of the speaker's ("My coworker just adopted a corgi",
  "Have you ever been to Lisbon?", "What kind of music do you like?"), the
  rest chit-chat in common words ("How was your weekend?").
Nothing about the corpus is tuned to a ranking: the templates were written
as a dialogue reads, before any side was run on them.

The sides
---------
- textbook BM25: Okapi BM25 computed here, k1 = 1.2, b = 0.75, text
  lower-cased and split on non-alphanumerics, no stemming, no stop words,
  idf = ln(1 + (N - n + 0.5) / (n + 0.5)), summed over the question's
  distinct terms; ties by point id.
- memoryd lexical: EpisodicMemory.Search mode SEARCH_MODE_LEXICAL on a
  memoryd without an embedder (--lexical ADDR).
- memoryd vector / hybrid: SEARCH_MODE_VECTOR and SEARCH_MODE_HYBRID on a
  memoryd whose --embedder-url is the embedder contract stand-in (--embed
  ADDR). The stand-in is not a model: its vector is a hashed bag of the
  text's lower-cased words, so "vector" here is a word-overlap cosine, not
  what a real embedding model would find.
Each question is one Search of limit 10. recall@k: the share of questions
whose evidence turn is among the first k hits; MRR: the mean of 1/rank of
the evidence turn, 0 when it is not in the first 10.

Usage: recall_quality.py [--lexical ADDR] [--embed ADDR] [--turns 10000]
         [--questions 300] [--seed 1] [--batch 100] [--collection NAME]
         [--dump FILE] [--deadline 30]
The bearer token comes from $BENCH_QUALITY_TOKEN (scopes episodic:read and
episodic:write). Without --lexical and --embed only the corpus and the
textbook side are computed. Prints the table, three lexical misses and one
JSON line (starting with '{'); exit 0 when it ran, 1 when a collection could
not be created or loaded, 2 for bad usage.
"""

import argparse
import json
import math
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time

# ---------------------------------------------------------------------------
# Slot pools
# ---------------------------------------------------------------------------

SPEAKERS = [
    "Ana", "Ben", "Chloe", "Dev", "Elena", "Farid", "Grace", "Hiro", "Isla", "Jonah",
    "Kavya", "Liam", "Maya", "Nikolai", "Olivia", "Priya", "Quinn", "Rosa", "Sam", "Tomas",
    "Uma", "Victor", "Wen", "Ximena", "Yusuf", "Zoe", "Aaron", "Bianca", "Carlos", "Dana",
    "Emeka", "Fatima", "Gabe", "Hana", "Ivan", "Jade", "Kofi", "Lena", "Marco", "Nadia",
    "Omar", "Paige", "Rafael", "Sofia", "Theo", "Valeria", "Will", "Yara", "Amir", "Beatriz",
    "Caleb", "Daria", "Eli", "Freya", "Gus", "Helen", "Ines", "Jamal", "Keiko", "Luca",
]
PETS = ["Rufus", "Biscuit", "Luna", "Pepper", "Milo", "Daisy", "Oscar", "Bella", "Ziggy",
        "Nala", "Toby", "Coco", "Mochi", "Bruno", "Pickles", "Waffles", "Juniper", "Ollie"]
TEACHERS = ["Greta", "Pete", "Mirela", "Oskar", "Tobias", "Ruth", "Desmond", "Annika",
            "Mr. Haddad", "Mrs. Okafor", "Mr. Lindqvist", "Ms. Duarte"]
PARTNERS = ["Jordan", "Alex", "Morgan", "Casey", "Riley", "Taylor", "Jamie", "Avery",
            "Robin", "Cameron", "Drew", "Harper"]
BABIES = ["Evie", "Mabel", "Aurora", "Ivy", "Clara", "Hazel", "Stella", "Poppy", "Willa",
          "Iris", "Margot", "Elsie"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]
SEASONS = ["spring", "summer", "fall", "winter"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
BREEDS = ["beagle", "labrador", "golden retriever", "corgi", "dachshund", "poodle", "husky",
          "border collie", "pug", "shiba inu", "greyhound", "boxer"]
CAT_KINDS = ["tabby", "siamese", "maine coon", "black", "ginger", "ragdoll", "persian"]
JOBS = ["nurse", "software engineer", "accountant", "graphic designer", "electrician",
        "paramedic", "pastry chef", "librarian", "data analyst", "architect", "pharmacist",
        "project manager", "physical therapist", "sous chef"]
COMPANIES = ["Helix Labs", "Northwind", "Brightpath", "Cobalt Systems", "Greenleaf Foods",
             "Riverside Clinic", "Atlas Freight", "Lumen Studio", "Pinecrest Bank",
             "Harbor Health", "Quarry Games", "Bluebird Logistics"]
PLACES = ["Lisbon", "Kyoto", "Patagonia", "Iceland", "the Scottish Highlands", "Banff",
          "Crete", "Marrakech", "Yosemite", "the Amalfi Coast", "Vancouver Island", "Hanoi",
          "Oaxaca", "Tasmania", "the Dolomites", "Cape Town"]
ACTIVITIES = ["hiking", "snorkeling", "skiing", "kayaking", "wine tasting", "surfing",
              "cycling", "scuba diving", "rock climbing"]
CITIES = ["Denver", "Portland", "Austin", "Chicago", "Seattle", "Boston", "Minneapolis",
          "Pittsburgh", "Raleigh", "Tucson", "Madison", "Sacramento", "Asheville", "Boise"]
SUBJECTS = ["landscapes", "portraits", "birds", "old barns", "city skylines", "flowers",
            "seascapes", "street scenes"]
MEDIUMS = ["watercolor", "oil", "acrylic", "gouache", "charcoal"]
INSTRUMENTS = ["guitar", "piano", "violin", "cello", "drums", "ukulele", "saxophone",
               "trumpet", "flute"]
LANGUAGES = [("Spanish", "Mexico"), ("Japanese", "Japan"), ("Italian", "Italy"),
             ("Korean", "Korea"), ("Portuguese", "Brazil"), ("German", "Austria"),
             ("Mandarin", "Taiwan"), ("French", "Morocco"), ("Greek", "Greece"),
             ("Dutch", "the Netherlands")]
EVENTS = ["half marathon", "marathon", "10k", "triathlon", "charity bike ride",
          "trail race", "open water swim"]
TITLES = ["The Salt Road", "A Quiet Harbor", "Northern Lights", "The Glass Orchard",
          "Iron and Ash", "The Last Ferry", "Small Hours", "The Cartographer's Daughter",
          "Winter Bees", "A House of Paper", "The Lighthouse Keeper", "Copper Sky"]
AUTHORS = ["Miriam Vale", "Tobias Crane", "Ayesha Rahman", "Colm Brennan", "Lucia Ferrante",
           "Dmitri Sokolov", "Naomi Achebe", "Henrik Solberg", "Rosalind Page",
           "Kenji Mori"]
RELATIONS = ["sister", "brother", "cousin", "best friend", "sister-in-law"]
PARTS = ["wrist", "ankle", "collarbone", "elbow", "big toe", "pinky finger", "kneecap"]
CAUSES = ["falling off a ladder", "slipping on ice", "playing soccer", "skateboarding",
          "tripping on the stairs", "playing basketball"]
VOLUNTEER_PLACES = ["animal shelter", "food bank", "soup kitchen", "public library",
                    "community garden", "children's hospital", "senior center"]
COLORS = ["red", "blue", "silver", "white", "green", "black", "yellow"]
MODELS = ["Subaru Outback", "Honda Civic", "Toyota Prius", "Mazda Miata", "Volvo wagon",
          "Ford pickup", "Jeep Wrangler", "Kia Soul", "Tesla"]
BANDS = ["Velvet Harbor", "The Lantern Club", "Neon Orchard", "Paper Wolves",
         "The Midnight Tide", "Golden Static", "Sister Moth", "The Cold Engines"]
DISHES = ["lasagna", "pad thai", "ramen", "paella", "banana bread", "sourdough bread",
          "dumplings", "chicken curry", "apple pie", "tamales", "beef stew", "tiramisu"]
OCCASIONS = ["Thanksgiving", "the office potluck", "the block party", "New Year's Eve",
             "the family reunion", "the school fundraiser"]
FIELDS = ["nursing", "computer science", "marine biology", "accounting", "architecture",
          "social work", "economics", "public health", "education", "mechanical engineering"]
SCHOOLS = ["Lakeside University", "Ridgemont College", "the state university",
           "Westbrook Institute", "Clearwater University", "Hillcrest College"]
ORDINALS = ["1st", "3rd", "5th", "8th", "11th", "12th", "14th", "17th", "20th", "22nd",
            "25th", "28th", "30th"]
PLANS = ["a picnic in the park", "karaoke night", "a small dinner", "an escape room",
         "a bowling party", "a beach bonfire"]
ALLERGENS = ["peanuts", "shellfish", "cats", "pollen", "penicillin", "strawberries",
             "dairy", "tree nuts"]
PLANTS = ["tomatoes", "sunflowers", "strawberries", "chili peppers", "lavender", "zucchini",
          "basil", "pumpkins", "roses"]
GARDEN_SPOTS = ["backyard", "balcony", "community plot", "greenhouse"]
WEDDING_PLACES = ["Lisbon", "a vineyard in Napa", "her grandmother's farm",
                  "a lake cabin in Maine", "Santorini", "the city courthouse",
                  "a barn in Vermont"]


def when(rng):
    """A relative date as people say it."""
    m, s = rng.choice(MONTHS), rng.choice(SEASONS)
    return rng.choice([f"last {m}", f"in {m}", f"back in {m}", f"this past {s}",
                       f"last {s}", "a couple of weeks ago", "over the holidays"])


# Slot name -> how to draw it (a function of rng). Slots drawn together
# (a language and its country) come from one draw, split below.
SLOTS = {
    "breed": BREEDS, "catkind": CAT_KINDS, "pet": PETS, "when": when, "job": JOBS,
    "company": COMPANIES, "month": MONTHS, "place": PLACES, "activity": ACTIVITIES,
    "city": CITIES, "subject": SUBJECTS, "medium": MEDIUMS, "instrument": INSTRUMENTS,
    "teacher": TEACHERS, "lang": LANGUAGES, "event": EVENTS, "title": TITLES,
    "author": AUTHORS, "relation": RELATIONS, "baby": BABIES, "part": PARTS,
    "cause": CAUSES, "vplace": VOLUNTEER_PLACES, "day": DAYS, "color": COLORS,
    "model": MODELS, "band": BANDS, "dish": DISHES, "occasion": OCCASIONS, "field": FIELDS,
    "school": SCHOOLS, "ordinal": ORDINALS, "plan": PLANS, "allergen": ALLERGENS,
    "plant": PLANTS, "spot": GARDEN_SPOTS, "partner": PARTNERS, "wplace": WEDDING_PLACES,
    "season": SEASONS,
}

# ---------------------------------------------------------------------------
# Facts: evidence wordings (who says it: S the subject, O the other speaker),
# question wordings, follow-ups (topic, no answer). A question is asked only
# of an evidence wording that holds every slot the question names.
# ---------------------------------------------------------------------------

FACTS = [
    {"kind": "dog",
     "evidence": [
         ("S", "We finally adopted a {breed} puppy {when}! We named him {pet}."),
         ("S", "I brought home a little {breed} from the shelter {when}, his name is {pet}."),
         ("S", "So {when} we got a dog, a {breed} called {pet}, and he already owns the couch."),
         ("O", "{S}, I can't believe you have a {breed} now, {pet} is the cutest puppy ever.")],
     "questions": ["What breed of dog did {S} adopt?", "What kind of dog does {S} have?",
                   "What is the name of {S}'s dog?", "What did {S} name the puppy?",
                   "What is {S}'s {breed} called?"],
     "followups": [("S", "The puppy chewed through another pair of my shoes."),
                   ("O", "Is your dog sleeping through the night yet?"),
                   ("S", "Walking the dog at six in the morning is rough in this weather."),
                   ("S", "We signed up for puppy training classes on Saturdays.")]},
    {"kind": "cat",
     "evidence": [
         ("S", "We adopted a {catkind} cat named {pet} from the rescue {when}."),
         ("S", "Meet {pet}, our new {catkind} kitten, we picked her up {when}."),
         ("O", "{S}, your {catkind} kitten {pet} looks like she runs the house already.")],
     "questions": ["What kind of cat did {S} adopt?", "What is {S}'s cat called?",
                   "What did {S} name the kitten?", "What is the name of {S}'s cat?"],
     "followups": [("S", "The cat knocked my coffee off the table again."),
                   ("O", "Does the kitten still hide under the bed?"),
                   ("S", "Cat hair on every sweater I own, it's a lifestyle now.")]},
    {"kind": "job",
     "evidence": [
         ("S", "Big news: I accepted an offer as a {job} at {company}, I start in {month}."),
         ("S", "I handed in my notice, {company} hired me as a {job} starting {month}."),
         ("O", "Congrats on the {job} position at {company}, {S}! Starting in {month}, right?")],
     "questions": ["Where is {S} going to work?", "What job did {S} accept?",
                   "Which company hired {S}?", "What is {S}'s new position?",
                   "What job does {S} start in {month}?"],
     "followups": [("S", "First week at the new job was exhausting."),
                   ("O", "How's the new job going so far?"),
                   ("S", "My new manager seems nice so far."),
                   ("S", "Still learning everyone's names at work.")]},
    {"kind": "trip",
     "evidence": [
         ("S", "We just got back from {place}, we spent ten days {activity} there in {month}."),
         ("S", "{month} was amazing, I finally did the {place} trip, mostly {activity} every day."),
         ("O", "{S}, your photos from {place} are incredible! How was the {activity} in {month}?")],
     "questions": ["Where did {S} travel in {month}?", "Which place did {S} visit on vacation?",
                   "Where did {S} go {activity}?", "What did {S} do on the trip to {place}?",
                   "Where did {S} go on holiday?"],
     "followups": [("S", "Still jet lagged from the trip, honestly."),
                   ("O", "Are you planning another trip soon?"),
                   ("S", "I miss being on vacation already.")]},
    {"kind": "painting",
     "evidence": [
         ("S", "Lately I've been painting {subject} in {medium}, mostly on Sunday mornings."),
         ("S", "I signed up for a {medium} class, and now I paint {subject} every weekend."),
         ("O", "{S}, that {medium} of {subject} you showed me belongs in a gallery!")],
     "questions": ["What does {S} like to paint?", "What kind of paintings does {S} make?",
                   "What has {S} been painting lately?", "What art has {S} been making lately?",
                   "What does {S} paint with {medium}?"],
     "followups": [("S", "I ruined another canvas today, so frustrating."),
                   ("O", "Have you finished the new painting yet?"),
                   ("S", "Art supplies are so expensive these days.")]},
    {"kind": "instrument",
     "evidence": [
         ("S", "I started taking {instrument} lessons with a teacher named {teacher}."),
         ("S", "{teacher} has been teaching me {instrument} every Tuesday evening, I'm learning to read music."),
         ("O", "How are the {instrument} lessons with {teacher} going, {S}?")],
     "questions": ["Which instrument is {S} learning?", "Who teaches {S} {instrument}?",
                   "What lessons is {S} taking?", "Who is {S}'s music teacher?",
                   "What instrument does {S} play?"],
     "followups": [("S", "My fingers hurt from practicing so much."),
                   ("S", "Practice has been going slowly this week."),
                   ("O", "Play me something next time we meet!")]},
    {"kind": "language",
     "evidence": [
         ("S", "I've been learning {lang} on my lunch breaks, we're visiting {country} next year."),
         ("S", "Three months of {lang} classes so far, so I won't be lost when we go to {country}."),
         ("O", "{S}, your {lang} is getting really good, {country} won't know what hit it.")],
     "questions": ["What language is {S} studying?", "Which language is {S} learning?",
                   "Which country is {S} planning to visit?",
                   "Why is {S} taking {lang} classes?", "What foreign language does {S} speak?"],
     "followups": [("S", "Vocabulary flashcards every morning, it's a grind."),
                   ("O", "Say something in the new language!"),
                   ("S", "The grammar is going to break me.")]},
    {"kind": "move",
     "evidence": [
         ("S", "We moved to {city} {when}, to be closer to family."),
         ("S", "Packing up everything and relocating to {city} {when} was exhausting, but we're settled now."),
         ("O", "How are you liking {city} since the move, {S}?")],
     "questions": ["Which city did {S} move to?", "Where does {S} live now?",
                   "Where did {S} relocate?", "Which city is {S} settled in?"],
     "followups": [("S", "Still unpacking boxes, it never ends."),
                   ("S", "Our new neighbours are really friendly."),
                   ("O", "Do you miss the old place?")]},
    {"kind": "race",
     "evidence": [
         ("S", "I did the {city} {event} in {month} and finished in the top half!"),
         ("S", "Crossed the finish line of my first {event} in {month}, right in {city}."),
         ("O", "{S}, you finished the {city} {event}! I saw the photos.")],
     "questions": ["Which race did {S} do in {month}?", "Where did {S} do the {event}?",
                   "What did {S} finish in {month}?", "What event did {S} complete in {city}?",
                   "What race did {S} run?"],
     "followups": [("S", "My legs are still sore from training."),
                   ("O", "Are you signing up for another race?"),
                   ("S", "Thinking about hiring a running coach.")]},
    {"kind": "book",
     "evidence": [
         ("S", "I just finished reading {title} by {author}, couldn't put it down."),
         ("S", "Stayed up until two finishing {title}, {author} really knows how to end a story."),
         ("O", "{S}, you were right about {title}, {author} is brilliant.")],
     "questions": ["What book did {S} read recently?", "Which novel by {author} did {S} finish?",
                   "What was {S} reading?", "Who wrote the book {S} just finished?",
                   "What book did {S} recommend?"],
     "followups": [("S", "I need a new book to read, any ideas?"),
                   ("O", "Did you ever join that book club?")]},
    {"kind": "baby",
     "evidence": [
         ("S", "My {relation} just had a baby girl in {month}, they named her {baby}!"),
         ("S", "Baby {baby} arrived in {month}, my {relation} is over the moon."),
         ("O", "{S}, congrats on becoming an auntie! How is little {baby}?")],
     "questions": ["What is the name of {S}'s {relation}'s baby?",
                   "What did {S}'s {relation} name the baby?",
                   "When was {S}'s {relation}'s baby born?",
                   "What is the name of the new baby in {S}'s family?",
                   "Who had a baby in {S}'s family?"],
     "followups": [("S", "Babysitting again this weekend, wish me luck."),
                   ("O", "Newborns are so tiny, I always forget how tiny.")]},
    {"kind": "injury",
     "evidence": [
         ("S", "I broke my {part} {cause} in {month}, so I'm off my feet for a while."),
         ("S", "The cast finally came off my {part}! Lesson learned about {cause}."),
         ("O", "{S}, how is the {part}? I still can't believe you broke it {cause}.")],
     "questions": ["How did {S} injure their {part}?", "What did {S} break?",
                   "Which bone did {S} break?", "What happened to {S} in {month}?",
                   "How did {S} get hurt?"],
     "followups": [("S", "Physical therapy is slow but it's helping."),
                   ("O", "Be careful out there, seriously."),
                   ("S", "I can finally sleep without the brace.")]},
    {"kind": "volunteer",
     "evidence": [
         ("S", "I've been volunteering at the {vplace} every {day} morning."),
         ("S", "On {day}s I help out at the {vplace}, it keeps me grounded."),
         ("O", "{S}, it's so cool that you give your {day}s to the {vplace}.")],
     "questions": ["Where does {S} volunteer?", "What does {S} do on {day}s?",
                   "Which place does {S} volunteer at?", "Where does {S} help out?"],
     "followups": [("S", "We served twice as many people as usual this week."),
                   ("O", "Do they need more volunteers?")]},
    {"kind": "car",
     "evidence": [
         ("S", "I traded in my old car and bought a {color} {model}."),
         ("S", "The new car is a used {model}, {color}, with barely any miles on it."),
         ("O", "Nice {model}, {S}! I love the {color}.")],
     "questions": ["What car did {S} buy?", "Which car does {S} drive now?",
                   "What color is {S}'s new car?", "What did {S} trade the old car for?",
                   "What kind of car does {S} have?"],
     "followups": [("S", "Parallel parking the new car is still terrifying."),
                   ("O", "Take me for a drive sometime!")]},
    {"kind": "concert",
     "evidence": [
         ("S", "Saw {band} live in {city} in {month}, best concert of my life."),
         ("S", "{band} played for three hours in {city} in {month}, my voice is gone."),
         ("O", "{S}, I'm so jealous you got tickets to {band} in {city}!")],
     "questions": ["Which band did {S} see in concert?", "What concert did {S} go to in {city}?",
                   "Who did {S} see live in {month}?", "What show did {S} get tickets for?",
                   "Which band did {S} see in {city}?"],
     "followups": [("S", "My ears are still ringing from the show."),
                   ("O", "Did you buy a t-shirt at the concert?")]},
    {"kind": "cooking",
     "evidence": [
         ("S", "I made homemade {dish} for {occasion} and everyone asked for the recipe."),
         ("S", "My {dish} turned out perfect this time, I'm bringing it to {occasion}."),
         ("O", "{S}, your {dish} at {occasion} was the best thing on the table.")],
     "questions": ["What did {S} cook for {occasion}?", "Which dish did {S} make?",
                   "What food is {S} bringing to {occasion}?", "What did {S} bake or cook?",
                   "What recipe did {S} make for {occasion}?"],
     "followups": [("S", "I burned my hand on the oven again."),
                   ("O", "You have to send me that recipe."),
                   ("S", "The kitchen was a disaster afterwards.")]},
    {"kind": "degree",
     "evidence": [
         ("S", "I finally graduated! A master's degree in {field} from {school}."),
         ("S", "Two years of night classes and now I have a degree in {field} from {school}."),
         ("O", "Congratulations on your {field} degree, {S}! {school} must be proud.")],
     "questions": ["What degree did {S} earn?", "Where did {S} study {field}?",
                   "What did {S} graduate in?", "Which school did {S} graduate from?",
                   "What did {S} study?"],
     "followups": [("S", "Job hunting after graduation is stressful."),
                   ("O", "Are you going to frame the diploma?")]},
    {"kind": "birthday",
     "evidence": [
         ("S", "My birthday is {month} {ordinal}, we're doing {plan} this year."),
         ("O", "Happy early birthday, {S}! {month} {ordinal}, right? Enjoy {plan}."),
         ("S", "For my birthday on {month} {ordinal} I just want {plan}, nothing fancy.")],
     "questions": ["When is {S}'s birthday?", "What is {S} doing for their birthday?",
                   "What are {S}'s birthday plans?", "What date is {S}'s birthday?",
                   "How is {S} celebrating turning a year older?"],
     "followups": [("S", "I'm not ready to be another year older."),
                   ("O", "What do you want for your birthday?")]},
    {"kind": "allergy",
     "evidence": [
         ("S", "Turns out I'm allergic to {allergen}, the doctor confirmed it {when}."),
         ("S", "No more {allergen} for me, the allergy test came back positive."),
         ("O", "{S}, I'll make sure there are no {allergen} at dinner, don't worry.")],
     "questions": ["What is {S} allergic to?", "What allergy does {S} have?",
                   "What did {S}'s allergy test show?", "What does {S} have to avoid?"],
     "followups": [("S", "I carry an epipen everywhere now."),
                   ("O", "Reading every food label must be exhausting.")]},
    {"kind": "garden",
     "evidence": [
         ("S", "The {spot} is full of {plant} this year, way more than we can use."),
         ("S", "I'm growing {plant} in the {spot} for the first time."),
         ("O", "{S}, those {plant} in your {spot} are huge!")],
     "questions": ["What is {S} growing?", "What plants does {S} have in the {spot}?",
                   "What did {S} plant this year?", "What grows in {S}'s garden?",
                   "What is {S} growing in the {spot}?"],
     "followups": [("S", "The squirrels keep digging up my garden."),
                   ("O", "How's the garden doing with all this heat?")]},
    {"kind": "wedding",
     "evidence": [
         ("S", "{partner} and I got married in {wplace} in {month}, tiny ceremony, just family."),
         ("S", "Our wedding in {wplace} was perfect, I still can't believe I married {partner}."),
         ("O", "{S}, the wedding photos from {wplace} are gorgeous, you and {partner} look so happy.")],
     "questions": ["Where did {S} get married?", "Who is {S}'s spouse?", "Who did {S} marry?",
                   "When was {S}'s wedding?", "Where was {S}'s wedding?"],
     "followups": [("S", "Married life is mostly arguing about the thermostat."),
                   ("O", "Where are you going for the honeymoon?")]},
]

# Topical chatter: the same pools, no fact of the speaker's ({O}: the one
# spoken to).
CHATTER = [
    "My coworker just adopted a {breed}, it's adorable.", "Have you ever thought about getting a dog?",
    "Dogs are great but they're a lot of work.", "My neighbour's {breed} barks all night.",
    "What breed is that dog in your neighbour's yard?", "Cats are easier than dogs, honestly.",
    "I'd love to visit {place} someday.", "Have you ever been to {place}? I hear {month} is the best time.",
    "My brother went {activity} in {place} last year and loved it.", "Where do you want to travel next?",
    "I'm terrible at painting, I can barely draw a stick figure.", "My aunt paints {subject}, she has a whole studio.",
    "I always wanted to learn the {instrument}.", "My kid's {instrument} teacher is really strict.",
    "Learning a language as an adult is so hard.", "My friend lives in {city}, she says the rent is crazy.",
    "Running a {event} sounds like torture to me, honestly.", "Have you read anything by {author}?",
    "My book club is doing {title} next month.", "Babies are so much work, my friend hasn't slept in months.",
    "My cousin broke her {part} last {season}.", "The {vplace} always needs volunteers, I should go sometime.",
    "Car prices are insane right now.", "I test drove a {model} but it was too expensive.",
    "{band} are playing in {city} in {month}, want to go?", "I tried to make {dish} once, total disaster.",
    "What are you cooking for {occasion}?", "I thought about going back to school for {field}.",
    "My sister is allergic to {allergen}, so we're careful at dinner.",
    "Nothing I plant survives, not even {plant}.", "We went to a wedding in {wplace} in {month}, it rained the whole time.",
    "My manager wants me to start a new project in {month}.", "I'm thinking of looking for a new job, honestly.",
    "My friend is a {job} and works crazy hours.", "What kind of music do you like, {O}?",
    "Did you do anything fun in {month}?", "Who is your favourite author these days?",
    "What did you name your plants? I name all of mine.", "Where did you go on vacation last year, {O}?",
    "My parents moved to {city} when they retired.", "I saw a {color} {model} just like my uncle's today.",
    "The new {job} at my office is from {city}.", "Do you know anyone who works at {company}?",
    "I heard {company} is hiring again.", "My gym is doing a {event} challenge in {month}.",
    "We should do a trip together, maybe {place}?", "The library has a {lang} conversation group on {day}s.",
    "What instrument did you play in school?", "My grandma still paints {subject} at ninety.",
    "A {breed} at the park tried to steal my sandwich.", "Do you like {dish}? I could eat it every day.",
    "When is your next day off?", "Did you see they're opening a {vplace} near the station?",
    "I'm reading {title} now, slow start though.", "How did you meet your partner, {O}?",
    "What did you study in college?", "My cousin got married in {month}, the food was great.",
]

FILLER = [
    "Hey {O}! How have you been?", "Not much, just work and sleep honestly.", "Haha, same here.",
    "Did you do anything fun this weekend?", "The weather has been terrible lately.",
    "That sounds amazing!", "Oh no, I'm sorry to hear that.", "I know what you mean.",
    "Totally agree.", "Let's catch up again soon, {O}.", "Talk soon!", "Good morning, {O}!",
    "I've been so busy lately, sorry for the late reply.", "That's so exciting, tell me more!",
    "Wow, good for you!", "Honestly I just need a vacation.", "I binge-watched a whole series last night.",
    "Coffee first, then we talk.", "What did you end up doing last night?", "I'm so tired today.",
    "Work has been crazy this week.", "We should get lunch sometime.", "Ha, that's hilarious.",
    "I can't believe it's already {month}.", "Yeah, it was a long day.", "Sounds like a plan.",
    "Did you see the game last night?", "I'm trying to eat healthier this month.",
    "My phone died in the middle of the call, sorry.", "That reminds me, I need to call my mom.",
    "How's your family doing?", "Everyone's good, thanks for asking.", "Same old, same old.",
    "I'll send you the link later.", "No way! Really?", "I had the weirdest dream last night.",
    "It's been ages since we talked!", "Let me know how it goes.", "Fingers crossed for you!",
    "I'm proud of you, {O}.", "We did nothing special, just stayed home.",
    "I need to start going to bed earlier.", "Traffic was awful this morning.",
    "I finally cleaned out the garage.", "Do you have any plans for the holidays?",
    "Not yet, maybe something small.", "It's supposed to rain all week.", "I love that idea.",
    "Thanks, that means a lot.", "Okay, I have to run, bye!", "Miss you!",
    "What have you been up to?", "Did you get my message yesterday?", "How was your week, {O}?",
    "I'm finally taking a day off on Friday.", "Ugh, Mondays.", "Right? It's wild.",
]
REPLIES = [
    "Oh wow, congratulations!", "That's amazing news, {O}!", "No way, that's so cool.",
    "Send me pictures!", "How exciting, tell me everything.", "I love that for you.",
    "Wait, really? Since when?", "That's huge, {O}.", "Oh that sounds lovely.", "Thanks, {O}!",
]

SESSIONS = 10
TURNS_PER_SESSION = 20
SLOT_RE = re.compile(r"\{(\w+)\}")
STOP = set("a an and are at be by can did do does for from has have how i in is it me my of on s "
           "the their they this to was we what when where which who why with you your".split())


def draw_slots(rng):
    """One value for every slot (a template uses what it names)."""
    v = {}
    for name, pool in SLOTS.items():
        v[name] = pool(rng) if callable(pool) else rng.choice(pool)
    v["lang"], v["country"] = v["lang"]
    return v


def fill(template, values):
    text = SLOT_RE.sub(lambda m: values[m.group(1)], template)
    return re.sub(r"\b([Aa]) (?=[aeioAEIO])", r"\1n ", text)  # "an accountant"


def slots_of(template):
    return {m for m in SLOT_RE.findall(template) if m not in ("S", "O")}


def words(text):
    """The textbook tokenizer: lower case, split on non-alphanumerics."""
    return re.findall(r"[a-z0-9]+", text.lower())


def build_corpus(turns, questions, seed):
    """Returns (texts, qa, shape): texts[i] is point i + 1's text; qa a list of
    {question, evidence (point id), kind, shared}; shape a dict of counts."""
    rng = random.Random(seed)
    per_dialogue = SESSIONS * TURNS_PER_SESSION
    dialogues = max(1, turns // per_dialogue)
    asked_per = -(-questions // dialogues)
    names = []
    while len(names) < 2 * dialogues:
        batch = SPEAKERS[:]
        rng.shuffle(batch)
        names.extend(batch)
    reserved = set()  # (name, kind): one fact of a kind per name in the corpus
    texts, qa = [], []
    for d in range(dialogues):
        a, b = names[2 * d], names[2 * d + 1]
        if a == b:
            b = next(n for n in SPEAKERS if n != a)
        # The dialogue's facts: asked ones first, then as many unasked.
        facts = []
        for i in range(2 * asked_per):
            for _ in range(100):
                subj = rng.choice((a, b))
                f = rng.choice(FACTS)
                if (subj, f["kind"]) not in reserved:
                    break
            else:
                continue
            reserved.add((subj, f["kind"]))
            ev_who, ev_t = rng.choice(f["evidence"])
            session = rng.randrange(SESSIONS)
            later = list(range(session + 1, SESSIONS))
            facts.append({"fact": f, "subject": subj, "other": b if subj == a else a,
                          "who": subj if ev_who == "S" else (b if subj == a else a),
                          "template": ev_t, "values": draw_slots(rng),
                          "asked": i < asked_per, "session": session,
                          "followups": rng.sample(later, min(len(later), rng.choice((1, 2))))})
        for s in range(SESSIONS):
            first = rng.choice((a, b))
            second = b if first == a else a
            speakers = [first if t % 2 == 0 else second for t in range(TURNS_PER_SESSION)]
            slots = [None] * TURNS_PER_SESSION
            slots[0] = ("open", None)
            slots[-1] = ("close", None)
            for f in (f for f in facts if f["session"] == s):
                # An even or odd position by who speaks, then the other's reply.
                free = [t for t in range(1, TURNS_PER_SESSION - 2)
                        if speakers[t] == f["who"] and slots[t] is None and slots[t + 1] is None]
                if not free:
                    f["session"] = -1  # no room: dropped
                    continue
                t = rng.choice(free)
                slots[t], slots[t + 1] = ("fact", f), ("reply", None)
            for f in (f for f in facts if s in f["followups"]):
                who_key, text = rng.choice(f["fact"]["followups"])
                who = f["subject"] if who_key == "S" else f["other"]
                free = [t for t in range(1, TURNS_PER_SESSION - 1)
                        if speakers[t] == who and slots[t] is None]
                if free:
                    slots[rng.choice(free)] = ("followup", text)
            for t in range(TURNS_PER_SESSION):
                spk = speakers[t]
                other = b if spk == a else a
                kind, arg = slots[t] or (("chatter" if rng.random() < 0.4 else "filler"), None)
                values = draw_slots(rng)
                values.update(S=spk, O=other)
                if kind == "open":
                    text = rng.choice(["Hey {O}! How have you been?", "Hi {O}, long time no talk!",
                                       "Good morning, {O}!", "Hey {O}, got a minute?",
                                       "{O}! Guess what happened this week."])
                elif kind == "close":
                    text = rng.choice(["Talk soon, {O}!", "Okay, I have to run, bye!",
                                       "Let's catch up again soon, {O}.", "Night, {O}!",
                                       "Gotta go, talk later."])
                elif kind == "reply":
                    text = rng.choice(REPLIES)
                elif kind == "followup":
                    text = arg
                elif kind == "chatter":
                    text = rng.choice(CHATTER)
                elif kind == "filler":
                    text = rng.choice(FILLER)
                else:  # fact
                    fv = dict(arg["values"], S=arg["subject"], O=arg["other"])
                    text = arg["template"]
                    values = fv
                texts.append(f"{spk}: {fill(text, values)}")
                if kind == "fact":
                    arg["id"] = len(texts)
                    arg["text"] = texts[-1]
        for f in facts:
            if not f["asked"] or f["session"] < 0:
                continue
            have = slots_of(f["template"])
            fitting = [q for q in f["fact"]["questions"] if slots_of(q) <= have]
            q = fill(rng.choice(fitting), dict(f["values"], S=f["subject"]))
            qw = {w for w in words(q) if w not in STOP}
            ew = {w for w in words(f["text"]) if w not in STOP}
            qa.append({"question": q, "evidence": f["id"], "kind": f["fact"]["kind"],
                       "shared": len(qw & ew)})
    # The first `questions` in corpus order; spread over the dialogues.
    qa = qa[:questions]
    shape = {"dialogues": dialogues, "sessions": SESSIONS, "turns_per_session": TURNS_PER_SESSION,
             "turns": len(texts), "questions": len(qa)}
    return texts, qa, shape


# ---------------------------------------------------------------------------
# Textbook BM25
# ---------------------------------------------------------------------------

class TextbookBM25:
    """Okapi BM25 over texts (point i + 1 = texts[i]), k1 1.2, b 0.75."""

    def __init__(self, texts, k1=1.2, b=0.75):
        self.k1, self.b = k1, b
        self.postings = {}
        self.lengths = []
        for doc, text in enumerate(texts, 1):
            tf = {}
            for w in words(text):
                tf[w] = tf.get(w, 0) + 1
            self.lengths.append(sum(tf.values()))
            for w, c in tf.items():
                self.postings.setdefault(w, []).append((doc, c))
        self.n = len(texts)
        self.avgdl = sum(self.lengths) / max(1, self.n)

    def search(self, query, limit=10):
        scores = {}
        for w in dict.fromkeys(words(query)):  # distinct terms, in order
            post = self.postings.get(w)
            if not post:
                continue
            df = len(post)
            idf = math.log(1 + (self.n - df + 0.5) / (df + 0.5))
            for doc, tf in post:
                dl = self.lengths[doc - 1]
                norm = tf + self.k1 * (1 - self.b + self.b * dl / self.avgdl)
                scores[doc] = scores.get(doc, 0.0) + idf * tf * (self.k1 + 1) / norm
        return [d for d, _ in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]]


# ---------------------------------------------------------------------------
# memoryd through gRPC, no generated code: message classes from a
# descriptor set protoc compiles out of protos/ (as bench/recall.sh encodes
# its requests).
# ---------------------------------------------------------------------------

class Memoryd:
    def __init__(self, addr, token, deadline):
        import grpc
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
        self.grpc = grpc
        root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
        with tempfile.TemporaryDirectory(prefix="recall-quality-") as tmp:
            out = os.path.join(tmp, "episodic.desc")
            subprocess.run(["protoc", "--include_imports", f"--descriptor_set_out={out}",
                            "-I", os.path.join(root, "protos"), "-I", "/usr/include",
                            "memory/v1/episodic_memory.proto"], check=True)
            with open(out, "rb") as f:
                fds = descriptor_pb2.FileDescriptorSet.FromString(f.read())
        pool = descriptor_pool.DescriptorPool()
        for fd in fds.file:
            pool.Add(fd)
        factory = message_factory.MessageFactory(pool)
        get = getattr(message_factory, "GetMessageClass", None) or (
            lambda d: factory.GetPrototype(d))
        self.cls = {n: get(pool.FindMessageTypeByName("memory.v1." + n)) for n in (
            "CreateCollectionRequest", "CreateCollectionResponse", "EpisodicMemoryUpsertRequest",
            "EpisodicMemoryUpsertResponse", "EpisodicMemorySearchRequest",
            "EpisodicMemorySearchResponse")}
        self.mode = {v.name: v.number for v in pool.FindEnumTypeByName("memory.v1.SearchMode").values}
        self.cosine = pool.FindEnumTypeByName("memory.v1.Distance").values_by_name[
            "DISTANCE_COSINE"].number
        self.channel = grpc.insecure_channel(addr, options=[
            ("grpc.max_receive_message_length", 64 << 20)])
        self.md = [("authorization", f"Bearer {token}")]
        self.deadline = deadline
        self.addr = addr

    def _call(self, method, req, resp):
        stub = self.channel.unary_unary(f"/memory.v1.EpisodicMemory/{method}",
                                        request_serializer=lambda m: m.SerializeToString(),
                                        response_deserializer=self.cls[resp].FromString)
        return stub(req, metadata=self.md, timeout=self.deadline)

    def create(self, name):
        req = self.cls["CreateCollectionRequest"](name=name, dims=0, distance=self.cosine)
        return self._call("CreateCollection", req, "CreateCollectionResponse")

    def upsert(self, name, first_id, texts):
        req = self.cls["EpisodicMemoryUpsertRequest"](collection=name)
        for i, t in enumerate(texts):
            p = req.points.add()
            p.id.num = first_id + i
            p.text = t
        return self._call("Upsert", req, "EpisodicMemoryUpsertResponse")

    def search(self, name, text, mode, limit=10):
        req = self.cls["EpisodicMemorySearchRequest"](collection=name, text=text, limit=limit,
                                                      mode=self.mode[mode])
        return self._call("Search", req, "EpisodicMemorySearchResponse")

    def describe(self, err):
        return f"{err.code().name}: {err.details()}"


def load(server, name, texts, batch, log):
    """Creates collection name and upserts texts; returns (seconds, error or None)."""
    t0 = time.monotonic()
    try:
        server.create(name)
        for at in range(0, len(texts), batch):
            server.upsert(name, at + 1, texts[at:at + batch])
    except server.grpc.RpcError as e:
        return time.monotonic() - t0, f"{server.addr} {log}: {server.describe(e)}"
    return time.monotonic() - t0, None


class Side:
    def __init__(self, label):
        self.label = label
        self.ranks = []  # 1..10, or None
        self.top = []    # first hit per question, or None
        self.errors = 0
        self.first_error = None
        self.partial = 0
        self.seconds = 0.0
        self.load_seconds = None
        self.failed = None

    def record(self, evidence, hits):
        self.ranks.append(hits.index(evidence) + 1 if evidence in hits[:10] else None)
        self.top.append(hits[0] if hits else None)

    def figures(self):
        n = len(self.ranks)
        if self.failed or n == 0:
            return None
        r = {f"recall@{k}": sum(1 for x in self.ranks if x and x <= k) / n for k in (1, 5, 10)}
        r["mrr"] = sum(1 / x for x in self.ranks if x) / n
        return r


def run_memoryd(side, server, name, qa, mode):
    t0 = time.monotonic()
    for q in qa:
        try:
            resp = server.search(name, q["question"], mode)
            hits = [p.point.id.num for p in resp.points]
            side.partial += bool(resp.partial)
        except server.grpc.RpcError as e:
            side.errors += 1
            side.first_error = side.first_error or server.describe(e)
            hits = []
        side.record(q["evidence"], hits)
    side.seconds = time.monotonic() - t0


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lexical", help="memoryd without an embedder, HOST:PORT")
    p.add_argument("--embed", help="memoryd with the embedder stand-in, HOST:PORT")
    p.add_argument("--turns", type=int, default=10000)
    p.add_argument("--questions", type=int, default=300)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--collection", default="recall_quality")
    p.add_argument("--deadline", type=float, default=30.0, help="seconds per call")
    p.add_argument("--dump", help="write the corpus and questions here (JSON lines)")
    a = p.parse_args(argv)
    if a.turns < 1 or a.questions < 1 or not 1 <= a.batch <= 1000:
        p.error("--turns and --questions must be positive, --batch 1 to 1000")
    token = os.environ.get("BENCH_QUALITY_TOKEN", "")
    if (a.lexical or a.embed) and not token:
        p.error("BENCH_QUALITY_TOKEN is not set")

    t0 = time.monotonic()
    texts, qa, shape = build_corpus(a.turns, a.questions, a.seed)
    if a.dump:
        with open(a.dump, "w", encoding="utf-8") as f:
            for i, t in enumerate(texts, 1):
                f.write(json.dumps({"id": i, "text": t}) + "\n")
            for q in qa:
                f.write(json.dumps(q) + "\n")
    print(f"recall_quality: corpus of {shape['turns']} turns ({shape['dialogues']} dialogues x "
          f"{SESSIONS} sessions x {TURNS_PER_SESSION} turns), {shape['questions']} questions, "
          f"seed {a.seed}, built in {time.monotonic() - t0:.1f}s", file=sys.stderr)

    sides = []
    textbook = Side("textbook BM25 (bench)")
    t1 = time.monotonic()
    bm25 = TextbookBM25(texts)
    for q in qa:
        textbook.record(q["evidence"], bm25.search(q["question"]))
    textbook.seconds = time.monotonic() - t1
    sides.append(textbook)

    lexical = vector = hybrid = None
    servers = []
    if a.lexical:
        lexical = Side("memoryd lexical")
        servers.append((Memoryd(a.lexical, token, a.deadline), a.collection + "_lexical",
                        [(lexical, "SEARCH_MODE_LEXICAL")]))
        sides.append(lexical)
    if a.embed:
        vector, hybrid = Side("memoryd vector (stand-in)"), Side("memoryd hybrid")
        servers.append((Memoryd(a.embed, token, a.deadline), a.collection + "_embed",
                        [(vector, "SEARCH_MODE_VECTOR"), (hybrid, "SEARCH_MODE_HYBRID")]))
        sides += [vector, hybrid]

    # Both servers load at once (one thread each: gRPC waits outside the GIL).
    results = {}

    def loader(i, server, name):
        results[i] = load(server, name, texts, a.batch, "loading " + name)

    threads = [threading.Thread(target=loader, args=(i, s, n)) for i, (s, n, _) in enumerate(servers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, (server, name, modes) in enumerate(servers):
        seconds, err = results[i]
        print(f"recall_quality: {len(texts)} turns upserted into {name} on {server.addr} "
              f"in {seconds:.1f}s{' FAILED: ' + err if err else ''}", file=sys.stderr)
        for side, mode in modes:
            side.load_seconds = seconds
            if err:
                side.failed = err
                continue
            run_memoryd(side, server, name, qa, mode)
            print(f"recall_quality: {side.label}: {len(qa)} searches in {side.seconds:.1f}s",
                  file=sys.stderr)

    # ---- the table ----------------------------------------------------------
    n = len(qa)
    print()
    print(f"Text recall quality: {shape['turns']} turns ({shape['dialogues']} dialogues x "
          f"{SESSIONS} sessions x {TURNS_PER_SESSION} turns), {n} questions, seed {a.seed}; "
          f"Search limit 10")
    row = "{:<27} {:>9} {:>9} {:>10} {:>7} {:>7} {:>9}"
    print(row.format("side", "recall@1", "recall@5", "recall@10", "MRR", "errors", "ms/query"))
    for s in sides:
        f = s.figures()
        ms = f"{s.seconds / n * 1000:.2f}" if n and not s.failed else "-"
        if f is None:
            print(row.format(s.label, "-", "-", "-", "-", s.errors, ms) + "  (" + (s.failed or "no figures") + ")")
            continue
        print(row.format(s.label, f"{f['recall@1']:.3f}", f"{f['recall@5']:.3f}",
                         f"{f['recall@10']:.3f}", f"{f['mrr']:.3f}", s.errors, ms))
    notes = [f"{s.label}: {s.errors} searches failed, first: {s.first_error}" for s in sides if s.errors]
    notes += [f"{s.label}: {s.partial} answers partial (the vector part failed or ran out of time)"
              for s in sides if s.partial]
    for line in notes:
        print("  " + line)

    # recall@10 by how many content words (exact forms, common words left
    # out) a question shares with its evidence turn.
    buckets = [("0-1", lambda k: k <= 1), ("2", lambda k: k == 2), ("3+", lambda k: k >= 3)]
    print()
    print("recall@10 by content words a question shares with its evidence (exact form):")
    print(("{:<27}" + " {:>9}" * len(buckets)).format(
        "side", *[f"{b} ({sum(1 for q in qa if f(q['shared']))})" for b, f in buckets]))
    for s in sides:
        if s.figures() is None:
            continue
        cells = []
        for _, f in buckets:
            idx = [i for i, q in enumerate(qa) if f(q["shared"])]
            cells.append(f"{sum(1 for i in idx if s.ranks[i]) / len(idx):.3f}" if idx else "-")
        print(("{:<27}" + " {:>9}" * len(buckets)).format(s.label, *cells))

    if lexical and lexical.figures():
        misses = [i for i, r in enumerate(lexical.ranks) if r is None]
        print()
        print(f"memoryd lexical missed {len(misses)} of {n} in its top 10; for example:")
        step = max(1, len(misses) // 3)
        for i in misses[::step][:3]:
            q, top = qa[i], lexical.top[i]
            tb = textbook.ranks[i]
            print(f"  Q: {q['question']}")
            print(f"     evidence #{q['evidence']}: {texts[q['evidence'] - 1]}")
            print(f"     lexical's first hit: {texts[top - 1] if top else '(none)'}")
            print(f"     textbook BM25: {'rank ' + str(tb) if tb else 'missed too'}")

    figures = {s.label: s.figures() for s in sides}
    tb10 = figures[textbook.label]["recall@10"]
    ratio = None
    if lexical and figures[lexical.label]:
        lx10 = figures[lexical.label]["recall@10"]
        ratio = lx10 / tb10 if tb10 else None
        print()
        print(f"lexical/textbook recall@10: x{ratio:.2f} (memoryd lexical {lx10:.3f}, textbook "
              f"BM25 {tb10:.3f}; goal >= 1)" if ratio is not None else
              "lexical/textbook recall@10: nan (textbook recall@10 is 0)")
    summary = {"bench": "recall_quality", "seed": a.seed, **shape,
               "sides": {s.label: dict(figures[s.label] or {}, errors=s.errors, partial=s.partial,
                                       search_s=round(s.seconds, 3),
                                       load_s=None if s.load_seconds is None else round(s.load_seconds, 3),
                                       failed=s.failed)
                         for s in sides},
               "ratio_lexical_textbook_recall10": ratio}
    print(json.dumps(summary))
    return 1 if any(s.failed for s in sides) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
