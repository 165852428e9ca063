"""The user turns the shipped drafter is trained on: seed topics written for this project, expanded
by templates into chat requests (code, arithmetic with step-by-step answers, explanations, everyday
chat, and Spanish, French and German requests). The answers are the target's own (drafter_chat.py).

Source and license: the seed lists and templates below were written for eagle_nb and carry its
license; no outside data set is used, so the recipe runs offline. The evaluation prompts
(`data/eval_prompts.jsonl`) were written separately, by hand, and share no template with these;
`tests/train/test_chat_recipe.py` checks that no evaluation request appears here.
Knows nothing about models or tokenizers.
"""
from __future__ import annotations

import random

CODE_TASKS = [
    "reverses a list", "counts the vowels in a string", "checks whether a string is a palindrome",
    "returns the largest number in a list", "computes the factorial of n", "merges two sorted lists",
    "removes duplicates from a list while keeping the order", "computes the n-th Fibonacci number",
    "converts Celsius to Fahrenheit", "checks whether a year is a leap year",
    "counts how often each word appears in a text", "flattens a nested list",
    "returns the second smallest element of a list", "sums the digits of an integer",
    "capitalizes the first letter of every word", "finds the common elements of two lists",
    "splits a list into chunks of size k", "checks whether two strings are anagrams",
    "computes the average of a list of numbers", "reads a text file and counts its lines",
    "sorts a list of dictionaries by a key", "returns the median of a list",
    "converts a binary string to an integer", "finds the index of an item with binary search",
    "computes the greatest common divisor of two numbers", "rotates a list by k positions",
    "validates a simple email address", "groups words by their first letter",
    "transposes a matrix given as a list of lists", "counts the words longer than five letters",
    "returns the prime numbers below n", "computes compound interest",
    "parses a date string like 2024-03-15", "removes punctuation from a string",
    "finds the longest word in a sentence", "converts a dictionary to a list of pairs",
    "checks whether a list is sorted", "generates a random password",
    "computes the distance between two points", "returns the unique characters of a string",
]
CODE_LANGS = ["Python", "Python", "Python", "JavaScript", "C"]
CODE_TEMPLATES = [
    "Write a {lang} function that {task}.",
    "How do I write a {lang} function that {task}?",
    "Show me {lang} code that {task}, and explain it briefly.",
    "Can you write a short {lang} program that {task}?",
]
CODE_CONCEPTS = [
    "a for loop", "recursion", "a dictionary in Python", "list comprehensions", "a class and an object",
    "exceptions and try/except", "a hash table", "big-O notation", "a linked list", "a stack and a queue",
    "unit tests", "version control with git", "an API", "a variable's scope", "lambda functions",
    "a SQL join", "JSON", "the difference between a list and a tuple", "a generator in Python",
    "type hints in Python",
]
CODE_CONCEPT_TEMPLATES = ["Explain {c} with a short code example.", "How does {c} work? Give an example."]

ITEMS = ["apples", "books", "pencils", "marbles", "cookies", "stickers", "oranges", "coins", "cards",
         "bottles of water", "tickets", "eggs"]
NAMES = ["Anna", "Ben", "Carla", "David", "Emma", "Farid", "Grace", "Hugo", "Ines", "Jonas", "Kim",
         "Leo", "Maya", "Noah", "Olga", "Pedro"]


def arithmetic(rng: random.Random) -> str:
    """One arithmetic or word problem with fresh numbers, asking for the steps."""
    a, b, c = rng.randint(3, 99), rng.randint(2, 60), rng.randint(2, 12)
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    return rng.choice([
        f"What is {a} + {b}? Explain step by step.",
        f"What is {a} times {c}? Show your work.",
        f"What is {a * c} divided by {c}? Explain your steps.",
        f"Calculate {a} - {b} and explain how you did it.",
        f"What is {b}% of {a * 10}? Explain step by step.",
        f"{name} has {a} {item} and gives {min(b, a)} to a friend. How many {item} are left? "
        f"Think step by step.",
        f"{name} buys {c} packs of {item} with {b} in each pack. How many {item} is that in total? "
        f"Solve it step by step.",
        f"A shop sells {item} for {c} dollars each. How much do {b} of them cost? Explain.",
        f"A car drives {a * c} km in {c} hours. What is its average speed? Show the calculation.",
        f"If a rectangle is {a} cm long and {c} cm wide, what is its area and perimeter?",
        f"Solve for x: {c}x + {b} = {c * a + b}. Show each step.",
        f"{name} saves {c} dollars every week. How much has {name} saved after {b} weeks?",
        f"What is the average of {a}, {b} and {c}? Explain step by step.",
        f"Is {a * 2 + 1} a prime number? Explain how you check.",
    ])


CONCEPTS = [
    "photosynthesis", "gravity", "the water cycle", "inflation", "democracy", "the immune system",
    "black holes", "evolution by natural selection", "electricity", "the greenhouse effect",
    "supply and demand", "DNA", "plate tectonics", "the Roman Empire", "the French Revolution",
    "climate change", "vaccines", "the internet", "machine learning", "renewable energy",
    "the solar system", "volcanoes", "earthquakes", "the human heart", "sleep", "nutrition",
    "the stock market", "interest rates", "taxes", "the printing press", "the Industrial Revolution",
    "magnetism", "atoms", "chemical reactions", "the moon's phases", "tides", "rainbows",
    "antibiotics", "the brain", "memory", "bees and pollination", "the ocean's currents",
    "recycling", "a budget", "compound interest", "the scientific method", "probability",
    "the Pythagorean theorem", "fractions", "percentages", "prime numbers", "the speed of light",
    "sound waves", "weather forecasts", "the seasons", "deserts", "rainforests", "coral reefs",
    "the Great Wall of China", "the pyramids of Egypt", "the Renaissance", "cloud computing",
    "encryption", "blockchain", "solar panels", "electric cars", "batteries", "the periodic table",
    "friction", "the Big Bang", "glaciers", "migration of birds", "photosynthesis in algae",
]
CONCEPT_TEMPLATES = [
    "Explain {c} in simple terms.", "What is {c}?", "Why is {c} important?",
    "Give me a short summary of {c}.", "How would you explain {c} to a child?",
    "What are the main facts about {c}?", "Can you describe {c} in a few sentences?",
]

SITUATIONS = [
    ("sleep better at night", "tips"), ("stay focused while studying", "tips"),
    ("start running as a beginner", "tips"), ("save money on groceries", "ideas"),
    ("learn to cook", "advice"), ("prepare for a job interview", "advice"),
    ("make new friends in a new city", "advice"), ("keep my houseplants alive", "tips"),
    ("organize my week", "tips"), ("plan a birthday party", "ideas"), ("reduce stress", "tips"),
    ("drink more water", "tips"), ("read more books", "tips"), ("write a good cover letter", "advice"),
    ("travel on a small budget", "tips"), ("be more productive in the morning", "tips"),
    ("learn a new language", "advice"), ("clean my apartment faster", "tips"),
    ("talk to my manager about a raise", "advice"), ("get better at public speaking", "tips"),
    ("eat healthier", "ideas"), ("spend less time on my phone", "tips"),
    ("take care of a new puppy", "advice"), ("keep in touch with old friends", "ideas"),
]
CHAT_TEMPLATES = [
    "I want to {s}. Any {k}?", "Can you give me some {k} to {s}?", "How can I {s}?",
    "What are three ways to {s}?",
]
CHAT_MISC = [
    "Write a short poem about {t}.", "Tell me a fun fact about {t}.", "Write a haiku about {t}.",
    "Suggest a name for a cafe that is about {t}.", "Write a short story about {t} in three sentences.",
    "What should I pack for a weekend trip to {p}?", "Plan a one-day visit to {p}.",
    "Write a polite email to {r} asking to {a}.", "Write a short birthday message for {r}.",
    "Recommend three activities for a rainy day with {r}.",
]
TOPICS = ["the sea", "autumn", "a cat", "the city at night", "coffee", "friendship", "the mountains",
          "rain", "a lighthouse", "the stars", "a garden", "winter", "a train journey", "music"]
PLACES = ["Paris", "Rome", "Tokyo", "the beach", "the mountains", "London", "Barcelona", "Berlin",
          "a national park", "New York"]
RECIPIENTS = ["my teacher", "my landlord", "a colleague", "my neighbor", "my grandmother", "my boss",
              "a friend"]
ASKS = ["move our meeting to Friday", "fix the heating", "share the slides", "borrow a ladder",
        "send the report", "join us for dinner"]

# Other languages: templates and topics written in each language (not translations of the
# English lists one for one, so that each language has its own distribution).
FOREIGN = {
    "es": (["Explica {c} de forma sencilla.", "¿Qué es {c}?", "¿Por qué es importante {c}?",
            "Dame un resumen corto sobre {c}.", "Escribe un poema corto sobre {c}.",
            "¿Cómo puedo aprender más sobre {c}?"],
           ["la fotosíntesis", "la gravedad", "el ciclo del agua", "la inflación", "la democracia",
            "el sistema inmunológico", "los volcanes", "la energía solar", "el reciclaje",
            "la historia de España", "el cambio climático", "la música", "el fútbol", "la amistad",
            "el océano", "los planetas", "la electricidad", "la salud", "el sueño", "la cocina"]),
    "fr": (["Explique {c} simplement.", "Qu'est-ce que {c} ?", "Pourquoi {c} est-il important ?",
            "Donne-moi un court résumé sur {c}.", "Écris un petit poème sur {c}.",
            "Quels sont les faits principaux sur {c} ?"],
           ["la photosynthèse", "la gravité", "le cycle de l'eau", "l'inflation", "la démocratie",
            "le système immunitaire", "les volcans", "l'énergie solaire", "le recyclage",
            "la Révolution française", "le changement climatique", "la musique", "le sport",
            "l'amitié", "la mer", "les étoiles", "l'électricité", "la santé", "le sommeil",
            "la cuisine française"]),
    "de": (["Erkläre {c} einfach.", "Was ist {c}?", "Warum ist {c} wichtig?",
            "Gib mir eine kurze Zusammenfassung über {c}.", "Schreibe ein kurzes Gedicht über {c}.",
            "Was sind die wichtigsten Fakten über {c}?"],
           ["die Photosynthese", "die Schwerkraft", "den Wasserkreislauf", "die Inflation",
            "die Demokratie", "das Immunsystem", "Vulkane", "die Sonnenenergie", "das Recycling",
            "die deutsche Geschichte", "den Klimawandel", "die Musik", "den Sport", "die Freundschaft",
            "das Meer", "die Sterne", "die Elektrizität", "die Gesundheit", "den Schlaf", "das Kochen"]),
}
TRANSLATE = ["Good morning, how are you?", "The weather is nice today.", "I would like a cup of coffee.",
             "Where is the train station?", "Thank you for your help.", "I am learning to cook.",
             "My favourite season is spring.", "We are going to the beach tomorrow."]
LANG_NAMES = {"es": "Spanish", "fr": "French", "de": "German"}


def _user(text: str, category: str, language: str = "en") -> dict:
    return {"messages": [{"role": "user", "content": text}], "category": category, "language": language}


TEMPLATED = 1400     # requests from the templates above; the stream continues with broad_seeds.py


def training_requests(n: int, seed: int = 0) -> list[dict]:
    """`n` distinct chat requests, deterministic in `seed`, with a category and language each; the
    first `n` of a fixed stream, so a larger `n` extends a smaller one. The first `TEMPLATED` come
    from the templates above (category shares: code 25%, arithmetic 20%, explanation 22%, chat
    15%, other languages 18%), the rest from `broad_seeds` (topic lists in six languages, standard
    library functions, arithmetic)."""
    rng = random.Random(seed)
    makers = [
        (0.25, "code", lambda: rng.choice(CODE_TEMPLATES).format(lang=rng.choice(CODE_LANGS),
                                                                 task=rng.choice(CODE_TASKS))
         if rng.random() < 0.8 else rng.choice(CODE_CONCEPT_TEMPLATES).format(c=rng.choice(CODE_CONCEPTS))),
        (0.20, "arithmetic", lambda: arithmetic(rng)),
        (0.22, "explanation", lambda: rng.choice(CONCEPT_TEMPLATES).format(c=rng.choice(CONCEPTS))),
        (0.15, "chat", lambda: _chat(rng)),
    ]
    out, seen = [], set()
    weights = [w for w, *_ in makers] + [0.18]
    while len(out) < min(n, TEMPLATED):
        i = rng.choices(range(len(weights)), weights)[0]
        if i < len(makers):
            _, cat, make = makers[i]
            text, lang = make(), "en"
        else:
            cat, (text, lang) = "language", _foreign(rng)
        if text not in seen:
            seen.add(text)
            out.append(_user(text, cat, lang))
    if n > TEMPLATED:
        from eagle_nb.train.broad_seeds import broad_request, stdlib_functions
        rng2, functions = random.Random(seed + 1000), stdlib_functions()
        while len(out) < n:
            text, cat, lang = broad_request(rng2, functions, arithmetic)
            if text not in seen:
                seen.add(text)
                out.append(_user(text, cat, lang))
    return out


def _chat(rng: random.Random) -> str:
    if rng.random() < 0.5:
        s, k = rng.choice(SITUATIONS)
        return rng.choice(CHAT_TEMPLATES).format(s=s, k=k)
    return rng.choice(CHAT_MISC).format(t=rng.choice(TOPICS), p=rng.choice(PLACES),
                                        r=rng.choice(RECIPIENTS), a=rng.choice(ASKS))


def _foreign(rng: random.Random) -> tuple[str, str]:
    lang = rng.choice(sorted(FOREIGN))
    if rng.random() < 0.2:
        return f"Translate into {LANG_NAMES[lang]}: {rng.choice(TRANSLATE)}", lang
    templates, topics = FOREIGN[lang]
    return rng.choice(templates).format(c=rng.choice(topics)), lang
