"""The second part of the drafter's request stream (chat_seeds.training_requests): broader requests
than the templated first part, because a drafter trained on the first part alone learned its
templates (held-out accuracy 0.49 at the first draft step on requests from the same templates,
0.32 on the hand-written evaluation prompts; data/README.md).

Three sources, all offline and license-clean:
- topic lists written for eagle_nb (its license), in English, Spanish, French, German, Italian and
  Portuguese, crossed with request forms (explain, compare, advise, list, plan, write);
- small functions of the Python standard library (CPython, PSF License Version 2), shown to the
  target with a request to explain, document, test, simplify or port them;
- the arithmetic word problems of the first part, with fresh numbers.
The evaluation prompts (`data/eval_prompts.jsonl`) were written separately and share no form with
these (tests/train/test_chat_recipe.py). Knows nothing about models or tokenizers.
"""
from __future__ import annotations

import importlib
import inspect
import random

EN_TOPICS = [
    "the history of the bicycle", "how bread rises", "why cats purr", "how airplanes stay in the air",
    "the life of bees", "how a battery stores energy", "the causes of the First World War",
    "how vaccines are tested", "the water in our oceans", "why leaves change colour", "coffee farming",
    "the invention of the telephone", "how money is printed", "what makes music sound sad",
    "the first moon landing", "how elections work", "why we dream", "the rules of chess",
    "the Olympic Games", "how a compass works", "desert animals", "the Silk Road", "how glass is made",
    "the human skeleton", "how wind turbines work", "why the ocean is salty", "the Amazon river",
    "how credit cards work", "the origins of football", "how a microwave heats food",
    "the life cycle of a star", "why we need sleep", "how spiders make silk", "ancient Greek theatre",
    "how recycling plants sort plastic", "the northern lights", "how a bill becomes a law",
    "the benefits of walking", "how cheese is made", "why some people are left-handed",
    "the history of writing", "how submarines dive", "the Mediterranean diet", "how tea is grown",
    "how a search engine finds pages", "the Vikings", "how earthquakes are measured",
    "why dogs wag their tails", "the metric system", "how a camera takes a picture",
    "public libraries", "how trains are powered", "the Aztec empire", "how the ear hears sound",
    "why the sea has waves", "how chocolate is made", "urban gardening", "the life of Marie Curie",
    "how 3D printers work", "the rings of Saturn", "how the post office delivers letters",
    "why exercise improves mood", "the history of jazz", "how a refrigerator compressor works",
    "the Sahara desert", "how bridges carry weight", "online privacy", "how to read a map",
    "the Roman roads", "how plants drink water", "the history of the calendar", "why we yawn",
    "how hurricanes form", "the printing of books today", "how a piano makes sound",
    "the life of a honeybee colony", "how noise-cancelling headphones work", "the Inca roads",
    "how spam filters work", "the Dead Sea", "how passwords are stored", "the invention of paper",
    "how a thermostat works", "why bread goes stale", "the history of the internet",
    "how birds find their way", "minimalism", "how a lighthouse works", "time zones",
]
EN_FORMS = [
    "Tell me about {t}.", "I'm curious about {t}. What should I know?",
    "Give me three interesting facts about {t}.", "Write a short paragraph about {t} for a school newsletter.",
    "What are common misconceptions about {t}?", "Summarize {t} in five bullet points.",
    "Explain {t} like I'm twelve years old.", "What would a beginner find surprising about {t}?",
    "Write a short quiz with three questions about {t}, with answers.",
    "Describe {t} in two short paragraphs.",
]
EN_CHAT = [
    "My friend is upset with me because I forgot her birthday. What can I do?",
    "I want to learn a new language this year. Which one should I choose and how do I start?",
    "Help me write a polite message declining an invitation to a wedding.",
    "I keep procrastinating on my homework. Any advice?",
    "What are some fun things to do on a rainy weekend at home?",
    "Can you suggest a simple weekly workout plan for someone who sits all day?",
    "I'm moving to a new apartment next month. Make me a checklist.",
    "Give me ideas for a cheap but thoughtful gift for my dad.",
    "How do I politely tell my roommate to clean up the kitchen?",
    "Plan a one-day trip to a city by the sea for two people.",
    "What should I pack for a three-day hiking trip?",
    "Write a thank-you note to a nurse who helped my mother.",
    "I'm nervous about giving a presentation at work. How can I calm down?",
    "Suggest five names for a small bakery.",
    "How can I make my mornings less rushed?",
    "Write a limerick about a forgetful robot.",
    "What are good habits for keeping a tidy desk?",
    "Help me write a short bio for my personal website. I am a graphic designer.",
    "My child doesn't want to eat vegetables. What can I try?",
    "Write a short motivational message for a friend running her first marathon.",
]
EN_CHAT_FORMS = [
    "Write a short poem about {x}.", "Write a four-line song chorus about {x}.",
    "Tell me a very short story about {x}.", "Give me five tips for {y}.",
    "What is a good way to {z}?", "Make a simple plan to {z} in one month.",
]
EN_CHAT_X = ["a lighthouse keeper", "the first snow of winter", "an old library", "a lost umbrella",
             "a train journey at night", "a grandmother's garden", "a city waking up", "a shy dragon",
             "the last day of summer", "a street musician", "a small boat at sea", "a kitten in the rain",
             "a bakery at dawn", "two old friends meeting again", "a robot learning to paint",
             "a snowy mountain village", "a busy airport", "the smell of rain", "a forgotten toy",
             "a fox in the city", "a summer thunderstorm", "a tiny island"]
EN_CHAT_Y = ["a long car trip with kids", "working from home", "a first date", "hosting a dinner party",
             "studying for exams", "keeping a journal", "taking better phone photos", "camping in the rain",
             "learning to swim as an adult", "saving for a holiday", "moving to a new country",
             "adopting a rescue dog", "running a book club", "keeping in touch with old friends",
             "making a small garden", "cooking for one person", "a job interview over video",
             "staying warm in winter", "travelling on a budget", "teaching a child to ride a bike"]
EN_CHAT_Z = ["learn to juggle", "start meditating", "get better at drawing", "wake up earlier",
             "learn basic first aid", "cook more at home", "read twenty books this year",
             "spend less time on my phone", "learn to play chess", "grow tomatoes on a balcony",
             "learn to type faster", "make my own bread", "improve my handwriting", "drink less coffee",
             "get better at public speaking", "learn the names of the stars", "declutter my wardrobe",
             "start a small podcast", "learn to knit", "remember people's names"]

FOREIGN = {
    "es": (["Háblame de {t}.", "¿Cuáles son tres datos curiosos sobre {t}?", "Escribe un párrafo corto sobre {t}.",
            "¿Qué debería saber un principiante sobre {t}?", "Resume {t} en cinco puntos.",
            "Explícale {t} a un niño de diez años."],
           ["los volcanes de Canarias", "la historia del chocolate", "el flamenco", "las abejas", "los huracanes",
            "el Camino de Santiago", "la dieta mediterránea", "los agujeros negros", "las vacunas",
            "la energía eólica", "los mayas", "el café de Colombia", "la Luna", "los dinosaurios",
            "el reciclaje de plástico", "la lectura", "los terremotos", "el ajedrez", "el pan", "los océanos"],
           ["¿Cómo puedo organizar mejor mi tiempo?", "Dame ideas para una cena rápida y sana.",
            "Escribe un mensaje para felicitar a un amigo por su nuevo trabajo.",
            "¿Qué puedo hacer un domingo lluvioso?", "Dame consejos para dormir mejor.",
            "Escribe un poema corto sobre el mar.", "¿Cómo empiezo a correr si nunca he hecho deporte?",
            "Ayúdame a planear un viaje de fin de semana."]),
    "fr": (["Parle-moi de {t}.", "Donne-moi trois faits intéressants sur {t}.", "Écris un court paragraphe sur {t}.",
            "Que devrait savoir un débutant sur {t} ?", "Résume {t} en cinq points.",
            "Explique {t} à un enfant de dix ans."],
           ["la tour Eiffel", "l'histoire du pain", "les abeilles", "les volcans", "la Lune", "les châteaux de la Loire",
            "le fromage", "les océans", "les dinosaures", "l'énergie nucléaire", "les impressionnistes",
            "le Tour de France", "les vaccins", "les trous noirs", "le recyclage", "la lecture",
            "les tremblements de terre", "les échecs", "le chocolat", "les forêts"],
           ["Comment mieux organiser ma semaine ?", "Donne-moi des idées pour un dîner rapide.",
            "Écris un message pour féliciter une amie de son nouveau travail.",
            "Que faire un dimanche de pluie ?", "Donne-moi des conseils pour mieux dormir.",
            "Écris un petit poème sur la neige.", "Comment commencer à courir quand on n'a jamais fait de sport ?",
            "Aide-moi à préparer un week-end à la mer."]),
    "de": (["Erzähl mir etwas über {t}.", "Nenne drei interessante Fakten über {t}.",
            "Schreibe einen kurzen Absatz über {t}.", "Was sollte ein Anfänger über {t} wissen?",
            "Fasse {t} in fünf Punkten zusammen.", "Erkläre {t} einem zehnjährigen Kind."],
           ["die Alpen", "die Geschichte des Brotes", "Bienen", "Vulkane", "den Mond", "die Berliner Mauer",
            "den Rhein", "die Ozeane", "Dinosaurier", "die Windenergie", "Beethoven", "das Oktoberfest",
            "Impfungen", "schwarze Löcher", "das Recycling", "das Lesen", "Erdbeben", "Schach", "Schokolade",
            "den Wald"],
           ["Wie kann ich meine Woche besser planen?", "Gib mir Ideen für ein schnelles Abendessen.",
            "Schreibe eine Nachricht, um einem Freund zum neuen Job zu gratulieren.",
            "Was kann man an einem regnerischen Sonntag machen?", "Gib mir Tipps für besseren Schlaf.",
            "Schreibe ein kurzes Gedicht über den Herbst.", "Wie fange ich mit dem Laufen an?",
            "Hilf mir, ein Wochenende am Meer zu planen."]),
    "it": (["Parlami di {t}.", "Dimmi tre curiosità su {t}.", "Scrivi un breve paragrafo su {t}.",
            "Cosa dovrebbe sapere un principiante su {t}?", "Riassumi {t} in cinque punti.",
            "Spiega {t} a un bambino di dieci anni."],
           ["il Colosseo", "la storia della pizza", "le api", "i vulcani", "la Luna", "Leonardo da Vinci",
            "il caffè espresso", "gli oceani", "i dinosauri", "l'energia solare", "Venezia", "il Rinascimento",
            "i vaccini", "i buchi neri", "il riciclo", "la lettura", "i terremoti", "gli scacchi",
            "il cioccolato", "le foreste"],
           ["Come posso organizzare meglio la mia settimana?", "Dammi idee per una cena veloce e sana.",
            "Scrivi un messaggio per congratularti con un amico per il nuovo lavoro.",
            "Cosa posso fare in una domenica di pioggia?", "Dammi consigli per dormire meglio.",
            "Scrivi una breve poesia sul mare.", "Come comincio a correre se non ho mai fatto sport?",
            "Aiutami a organizzare un fine settimana in montagna."]),
    "pt": (["Fale-me sobre {t}.", "Dê-me três curiosidades sobre {t}.", "Escreva um parágrafo curto sobre {t}.",
            "O que um iniciante deveria saber sobre {t}?", "Resuma {t} em cinco pontos.",
            "Explique {t} para uma criança de dez anos."],
           ["o Carnaval", "a história do pão", "as abelhas", "os vulcões", "a Lua", "a floresta amazônica",
            "o futebol", "os oceanos", "os dinossauros", "a energia solar", "Lisboa", "os descobrimentos",
            "as vacinas", "os buracos negros", "a reciclagem", "a leitura", "os terremotos", "o xadrez",
            "o café", "os rios"],
           ["Como posso organizar melhor a minha semana?", "Dê-me ideias para um jantar rápido.",
            "Escreva uma mensagem para parabenizar um amigo pelo novo emprego.",
            "O que fazer num domingo chuvoso?", "Dê-me dicas para dormir melhor.",
            "Escreva um poema curto sobre o mar.", "Como começo a correr se nunca fiz exercício?",
            "Ajude-me a planear um fim de semana na praia."]),
}

# small, pure-Python standard-library functions shown to the target (their source, PSF License)
STDLIB = ("textwrap", "string", "statistics", "fractions", "heapq", "bisect", "calendar", "colorsys",
          "shlex", "fnmatch", "posixpath", "html", "base64", "difflib", "random", "glob", "keyword",
          "operator", "copy", "functools", "json", "csv", "datetime", "ipaddress", "secrets", "uuid")
CODE_FORMS = [
    "Explain what this Python function does:\n\n```python\n{src}```",
    "Write a short docstring for this function:\n\n```python\n{src}```",
    "Write two unit tests for this function:\n\n```python\n{src}```",
    "Can this function be simplified? Show a simpler version.\n\n```python\n{src}```",
    "Rewrite this Python function in JavaScript:\n\n```python\n{src}```",
    "What are the inputs and outputs of this function?\n\n```python\n{src}```",
]
CODE_ASKS = [
    "Write a Python class for a simple bank account with deposit and withdraw methods.",
    "How do I sort a dictionary by its values in Python?", "What is the difference between == and is in Python?",
    "Write a SQL query that counts orders per customer.", "How do I reverse a string in JavaScript?",
    "Explain what a REST API is, with an example request.", "Write a bash command that finds all .txt files in a folder.",
    "How do I handle a missing key in a Python dictionary?", "Write a Python script that prints a multiplication table.",
    "What does the `with` statement do in Python?", "Write a function that checks if a number is even in C.",
    "How do I read a JSON file in Python?", "What is a virtual environment in Python and why use one?",
    "Write a regular expression that matches a date like 31/12/2024.",
    "How do I merge two dictionaries in Python?", "Explain the difference between a process and a thread.",
    "Write an HTML page with a heading and a button.", "How do I loop over a list with its index in Python?",
    "What is recursion? Show a small example in Python.", "Write a Python generator that yields square numbers.",
]


def stdlib_functions(max_lines: int = 24, modules=None, distinct: bool = False) -> list[str]:
    """Source of every public function of `modules` (default `STDLIB`) with 4..max_lines lines, in
    a fixed order; `distinct` drops repeated sources."""
    out, seen = [], set()
    for name in modules or STDLIB:
        mod = importlib.import_module(name)
        for attr in sorted(vars(mod)):
            obj = getattr(mod, attr)
            if attr.startswith("_") or not inspect.isfunction(obj) or obj.__module__ != name:
                continue
            try:
                src = inspect.getsource(obj)
            except (OSError, TypeError):
                continue
            if 4 <= src.count("\n") <= max_lines and not (distinct and src in seen):
                seen.add(src)
                out.append(src)
    return out


def broad_request(rng: random.Random, functions: list[str], arithmetic) -> tuple[str, str, str]:
    """(text, category, language) of one request: code 24%, explanation 20%, chat 20%, other
    languages 30%, arithmetic 6% (before distinct requests run out)."""
    kind = rng.choices(["code", "explanation", "chat", "language", "arithmetic"], [24, 20, 20, 30, 6])[0]
    if kind == "code":
        if rng.random() < 0.6:
            return rng.choice(CODE_FORMS).format(src=rng.choice(functions)), kind, "en"
        return rng.choice(CODE_ASKS), kind, "en"
    if kind == "explanation":
        return rng.choice(EN_FORMS).format(t=rng.choice(EN_TOPICS)), kind, "en"
    if kind == "chat":
        if rng.random() < 0.35:
            return rng.choice(EN_CHAT), kind, "en"
        return rng.choice(EN_CHAT_FORMS).format(x=rng.choice(EN_CHAT_X), y=rng.choice(EN_CHAT_Y),
                                                z=rng.choice(EN_CHAT_Z)), kind, "en"
    if kind == "language":
        lang = rng.choice(sorted(FOREIGN))
        forms, topics, chat = FOREIGN[lang]
        if rng.random() < 0.3:
            return rng.choice(chat), kind, lang
        return rng.choice(forms).format(t=rng.choice(topics)), kind, lang
    return arithmetic(rng), kind, "en"
