"""A deterministic, grammar-generated Spanish→English parallel corpus.

Every pair comes from one derivation of a small grammar that builds the Spanish and the English
side together, so the English is a function of the Spanish string alone:

- explicit subjects (no pro-drop), no "su", no word with two translations;
- gender and number agreement of articles, determiners, adjectives and verbs;
- adjective–noun reordering ("el gato negro" → "the black cat", "muy" → "very");
- negation with do-support ("no comió" → "did not eat", "no está" → "is not");
- questions with "¿…?" in Spanish and inversion / do-support in English;
- number words agreeing with plural nouns ("tres gatos negros" → "three black cats");
- relative clauses ("que" → "who"/"that"), complement clauses ("dice que" → "says that") and
  adverbial clauses ("porque", "cuando", "si", "aunque", "mientras", "pero", "y"), nestable.

Tenses are present (simple present), preterite (simple past; "ser"/"estar"/"haber" use the
imperfect) and future ("will"). Most sentences have 5–20 tokens; a few per cent, built from nested
clauses, run past 30 and up to about 60 tokens (punctuation counted as tokens).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

__all__ = ["generate_pairs", "load_splits"]

# Spanish person/number slots of a finite verb, and the three tenses.
_SLOTS = ("1s", "2s", "3s", "1p", "3p")
_TENSES = ("pres", "past", "fut")

# Noun kinds: P person, A animal, T thing, S count food, F mass food, D mass drink, L place.
_MASS_KINDS = frozenset("FD")

# Nouns: es_sg es_pl gender en_sg en_pl kind tags ("-" = no plural / no tags). Masculine plurals
# that would mean a mixed group ("hermanos", "padres", "hijos", "abuelos") are left out. Tags:
# fam (family: mostly possessives), nopos (no possessive: "mi mujer" is "my wife"), read (can be
# read or written), open (can be opened), surf (has a surface: "sobre"), mark (a landmark).
_NOUN_TABLE = """
hombre hombres m man men P nopos
mujer mujeres f woman women P nopos
niño niños m boy children P -
niña niñas f girl girls P -
profesor profesores m teacher teachers P -
profesora profesoras f teacher teachers P -
médico médicos m doctor doctors P -
médica médicas f doctor doctors P -
amigo amigos m friend friends P -
amiga amigas f friend friends P -
vecino vecinos m neighbor neighbors P -
vecina vecinas f neighbor neighbors P -
hermano - m brother - P fam
hermana hermanas f sister sisters P fam
padre - m father - P fam
madre madres f mother mothers P fam
abuelo - m grandfather - P fam
abuela abuelas f grandmother grandmothers P fam
hijo - m son - P fam
hija hijas f daughter daughters P fam
rey reyes m king kings P -
reina reinas f queen queens P -
camarero camareros m waiter waiters P -
camarera camareras f waitress waitresses P -
granjero granjeros m farmer farmers P -
pintor pintores m painter painters P -
soldado soldados m soldier soldiers P -
enfermera enfermeras f nurse nurses P -
abogado abogados m lawyer lawyers P -
alumno alumnos m student students P -
alumna alumnas f student students P -
ladrón ladrones m thief thieves P -
príncipe príncipes m prince princes P -
princesa princesas f princess princesses P -
gato gatos m cat cats A -
perro perros m dog dogs A -
caballo caballos m horse horses A -
vaca vacas f cow cows A -
pájaro pájaros m bird birds A -
ratón ratones m mouse mice A -
lobo lobos m wolf wolves A -
oveja ovejas f sheep sheep A -
pato patos m duck ducks A -
gallina gallinas f hen hens A -
cerdo cerdos m pig pigs A -
conejo conejos m rabbit rabbits A -
oso osos m bear bears A -
león leones m lion lions A -
tigre tigres m tiger tigers A -
elefante elefantes m elephant elephants A -
mono monos m monkey monkeys A -
zorro zorros m fox foxes A -
serpiente serpientes f snake snakes A -
tortuga tortugas f turtle turtles A -
rana ranas f frog frogs A -
pez peces m fish fish A -
ardilla ardillas f squirrel squirrels A -
burro burros m donkey donkeys A -
libro libros m book books T read,open
carta cartas f letter letters T read
periódico periódicos m newspaper newspapers T read
revista revistas f magazine magazines T read
mapa mapas m map maps T read
mesa mesas f table tables T surf,mark
silla sillas f chair chairs T surf,mark
puerta puertas f door doors T open,mark
ventana ventanas f window windows T open,mark
caja cajas f box boxes T open,surf,mark
coche coches m car cars T mark
bicicleta bicicletas f bicycle bicycles T -
barco barcos m boat boats T mark
tren trenes m train trains T mark
lápiz lápices m pencil pencils T -
cuaderno cuadernos m notebook notebooks T open
bolsa bolsas f bag bags T open
taza tazas f cup cups T -
vaso vasos m glass glasses T -
plato platos m plate plates T -
cuchillo cuchillos m knife knives T -
cuchara cucharas f spoon spoons T -
llave llaves f key keys T -
reloj relojes m clock clocks T -
lámpara lámparas f lamp lamps T -
cama camas f bed beds T surf,mark
sombrero sombreros m hat hats T -
camisa camisas f shirt shirts T -
zapato zapatos m shoe shoes T -
pelota pelotas f ball balls T -
juguete juguetes m toy toys T -
flor flores f flower flowers T -
árbol árboles m tree trees T mark
piedra piedras f stone stones T surf,mark
guitarra guitarras f guitar guitars T -
regalo regalos m gift gifts T open
botella botellas f bottle bottles T open
teléfono teléfonos m phone phones T -
computadora computadoras f computer computers T -
cuadro cuadros m painting paintings T -
espejo espejos m mirror mirrors T -
abrigo abrigos m coat coats T -
vestido vestidos m dress dresses T -
manzana manzanas f apple apples S -
naranja naranjas f orange oranges S -
plátano plátanos m banana bananas S -
huevo huevos m egg eggs S -
galleta galletas f cookie cookies S -
pastel pasteles m cake cakes S -
tomate tomates m tomato tomatoes S -
zanahoria zanahorias f carrot carrots S -
pan - m bread - F -
queso - m cheese - F -
carne - f meat - F -
pescado - m fish - F -
arroz - m rice - F -
sopa - f soup - F -
fruta - f fruit - F -
ensalada - f salad - F -
chocolate - m chocolate - F -
leche - f milk - D -
café - m coffee - D -
té - m tea - D -
jugo - m juice - D -
vino - m wine - D -
jardín jardines m garden gardens L -
parque parques m park parks L -
cocina cocinas f kitchen kitchens L -
casa casas f house houses L -
ciudad ciudades f city cities L -
bosque bosques m forest forests L -
pueblo pueblos m village villages L -
habitación habitaciones f room rooms L -
biblioteca bibliotecas f library libraries L -
tienda tiendas f shop shops L -
mercado mercados m market markets L -
oficina oficinas f office offices L -
hospital hospitales m hospital hospitals L -
museo museos m museum museums L -
restaurante restaurantes m restaurant restaurants L -
escuela escuelas f school schools L -
castillo castillos m castle castles L -
iglesia iglesias f church churches L -
lago lagos m lake lakes L -
"""

# Adjectives: forms english kinds copula. Forms ending in -o/-e inflect regularly; others list
# m_sg/f_sg/m_pl/f_pl. The copula ("ser" or "estar") is fixed per adjective.
_ADJECTIVE_TABLE = """
negro black ATS ser
blanco white ATSF ser
rojo red ATS ser
azul/azul/azules/azules blue AT ser
verde green ATS ser
amarillo yellow ATS ser
gris/gris/grises/grises gray AT ser
marrón/marrón/marrones/marrones brown AT ser
morado purple ATS ser
grande big PATSL ser
pequeño small PATSL ser
enorme enormous PATSL ser
alto tall PAT ser
largo long T ser
gordo fat PA ser
delgado thin PA ser
viejo old PATL ser
nuevo new TL ser
joven/joven/jóvenes/jóvenes young PA ser
bonito pretty PATL ser
feo ugly PATL ser
hermoso beautiful PATL ser
inteligente intelligent PA ser
simpático nice P ser
amable kind P ser
fuerte strong PA ser
débil/débil/débiles/débiles weak PA ser
rápido fast AT ser
lento slow AT ser
caro expensive TSFDL ser
barato cheap TSFDL ser
pesado heavy T ser
redondo round TS ser
suave soft AT ser
duro hard TS ser
famoso famous PAL ser
valiente brave PA ser
tímido shy PA ser
perezoso lazy PA ser
serio serious P ser
divertido funny PA ser
moderno modern TL ser
cómodo comfortable T ser
peligroso dangerous AL ser
ruidoso noisy PAL ser
oscuro dark TL ser
elegante elegant PTL ser
extraño strange PATSFDL ser
pobre poor P ser
delicioso delicious SF ser
dulce sweet SFD ser
limpio clean PATL estar
sucio dirty PATL estar
caliente hot SFD estar
frío cold SFD estar
lleno full TL estar
vacío empty TL estar
roto broken T estar
abierto open T estar
cerrado closed TL estar
cansado tired PA estar
contento happy PA estar
triste sad PA estar
enfermo sick PA estar
enfadado angry PA estar
ocupado busy P estar
nervioso nervous PA estar
preocupado worried P estar
sorprendido surprised PA estar
asustado scared PA estar
tranquilo calm PA estar
"""

_NAMES = {
    "m": "Juan Pedro Carlos Pablo Diego Miguel Luis Tomás Jorge Andrés".split(),
    "f": "Ana Elena Lucía Marta Sofía Laura Clara Isabel Carmen Julia".split(),
}

# Subject pronouns: spanish, slot, english, english agreement ("1s", "3s" or "pl"), gender (None =
# either, chosen per sentence).
_PRONOUNS = (
    ("yo", "1s", "I", "1s", None),
    ("tú", "2s", "you", "pl", None),
    ("usted", "3s", "you", "pl", None),
    ("él", "3s", "he", "3s", "m"),
    ("ella", "3s", "she", "3s", "f"),
    ("nosotros", "1p", "we", "pl", "m"),
    ("nosotras", "1p", "we", "pl", "f"),
    ("ellos", "3p", "they", "pl", "m"),
    ("ellas", "3p", "they", "pl", "f"),
    ("ustedes", "3p", "you", "pl", None),
)

_NUMBERS = tuple(
    zip(
        (
            "dos tres cuatro cinco seis siete ocho nueve diez once doce trece catorce quince "
            "dieciséis diecisiete dieciocho diecinueve veinte treinta cuarenta cincuenta cien"
        ).split(),
        [
            [w]
            for w in (
                "two three four five six seven eight nine ten eleven twelve thirteen fourteen "
                "fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty"
            ).split()
        ]
        + [["one", "hundred"]],
        strict=True,
    )
)

# Determiners: name -> ((m_sg, f_sg, m_pl, f_pl) Spanish, english singular, english plural).
_DETERMINERS = {
    "def": (("el", "la", "los", "las"), "the", "the"),
    "indef": (("un", "una", "unos", "unas"), "a", "some"),
    "this": (("este", "esta", "estos", "estas"), "this", "these"),
    "that": (("ese", "esa", "esos", "esas"), "that", "those"),
    "my": (("mi", "mi", "mis", "mis"), "my", "my"),
    "your": (("tu", "tu", "tus", "tus"), "your", "your"),
    "our": (("nuestro", "nuestra", "nuestros", "nuestras"), "our", "our"),
    "many": ((None, None, "muchos", "muchas"), None, "many"),
    "few": ((None, None, "pocos", "pocas"), None, "few"),
    "several": ((None, None, "varios", "varias"), None, "several"),
    "all": ((None, None, "todos los", "todas las"), None, "all the"),
}

# Location prepositions: spanish, english, noun kinds / tags they take.
_LOCATIONS = (
    ("en", "in", "L"),
    ("sobre", "on", "surf"),
    ("debajo de", "under", "mark"),
    ("cerca de", "near", "markL"),
    ("detrás de", "behind", "markL"),
    ("delante de", "in front of", "markL"),
    ("junto a", "next to", "markL"),
    ("lejos de", "far from", "L"),
)

# Adverbs placed after the verb phrase: spanish, english, tenses allowed.
_ADVERBS = (
    ("rápidamente", "quickly", "pres past fut"),
    ("lentamente", "slowly", "pres past fut"),
    ("bien", "well", "pres past fut"),
    ("mal", "badly", "pres past fut"),
    ("mucho", "a lot", "pres past fut"),
    ("tranquilamente", "calmly", "pres past fut"),
    ("hoy", "today", "pres past fut"),
    ("ayer", "yesterday", "past"),
    ("mañana", "tomorrow", "fut"),
    ("ahora", "now", "pres"),
)

# Adverbs placed before the verb, in affirmative statements only.
_PRE_ADVERBS = (("siempre", "always"), ("nunca", "never"))

_CONJUNCTIONS = {
    "porque": "because",
    "cuando": "when",
    "si": "if",
    "aunque": "although",
    "mientras": "while",
    "pero": "but",
    "y": "and",
}

_COPULAS = {
    "ser": {
        "pres": ("soy", "eres", "es", "somos", "son"),
        "past": ("era", "eras", "era", "éramos", "eran"),
        "fut": ("seré", "serás", "será", "seremos", "serán"),
    },
    "estar": {
        "pres": ("estoy", "estás", "está", "estamos", "están"),
        "past": ("estaba", "estabas", "estaba", "estábamos", "estaban"),
        "fut": ("estaré", "estarás", "estará", "estaremos", "estarán"),
    },
}
# Clause embeddings (relative, complement or adverbial clauses) a sentence may use, with the
# share of sentences drawn with each budget: most sentences get 0–2, a few per cent get 6–8.
_BUDGET_WEIGHTS = {0: 46, 1: 30, 2: 13, 3: 5, 6: 3, 8: 3}

_HABER = {"pres": "hay", "past": "había", "fut": "habrá"}


@dataclass(frozen=True, eq=False)
class _Noun:
    es_sg: str
    es_pl: str | None
    gender: str
    en_sg: str
    en_pl: str | None
    kind: str
    tags: frozenset[str]

    @property
    def mass(self) -> bool:
        return self.kind in _MASS_KINDS


@dataclass(frozen=True, eq=False)
class _Adjective:
    forms: tuple[str, str, str, str]
    en: str
    kinds: str
    copula: str

    def form(self, gender: str, plural: bool) -> str:
        return self.forms[(gender == "f") + 2 * plural]


@dataclass(frozen=True, eq=False)
class _Verb:
    forms: dict[tuple[str, str], str]
    en: tuple[str, str, str]  # base, 3rd singular, past
    frame: str  # "intr", "trans" or "comp"
    subjects: str  # noun kinds allowed as subject
    objects: str = ""  # noun kinds (or one tag) allowed as object
    loc: bool = False  # takes an optional location phrase
    live: bool = False  # "vivir en" + place
    core: bool = False  # also conjugated for "yo", "tú" and "nosotros"


def _parse_nouns() -> tuple[_Noun, ...]:
    nouns = []
    for line in _NOUN_TABLE.strip().splitlines():
        es_sg, es_pl, gender, en_sg, en_pl, kind, tags = line.split()
        nouns.append(
            _Noun(
                es_sg,
                None if es_pl == "-" else es_pl,
                gender,
                en_sg,
                None if en_pl == "-" else en_pl,
                kind,
                frozenset() if tags == "-" else frozenset(tags.split(",")),
            )
        )
    return tuple(nouns)


def _parse_adjectives() -> tuple[_Adjective, ...]:
    adjectives = []
    for line in _ADJECTIVE_TABLE.strip().splitlines():
        spec, en, kinds, copula = line.split()
        if "/" in spec:
            forms = tuple(spec.split("/"))
        elif spec.endswith("o"):
            stem = spec[:-1]
            forms = (spec, stem + "a", stem + "os", stem + "as")
        elif spec.endswith("e"):
            forms = (spec, spec, spec + "s", spec + "s")
        else:
            raise ValueError(f"Adjective {spec!r} needs its four forms spelled out.")
        adjectives.append(_Adjective(forms, en, kinds, copula))
    return tuple(adjectives)


_PRESENT_ENDINGS = {
    "ar": ("o", "as", "a", "amos", "an"),
    "er": ("o", "es", "e", "emos", "en"),
    "ir": ("o", "es", "e", "imos", "en"),
}
_PAST_ENDINGS = {
    "ar": ("é", "aste", "ó", "amos", "aron"),
    "er": ("í", "iste", "ió", "imos", "ieron"),
    "ir": ("í", "iste", "ió", "imos", "ieron"),
}
_FUTURE_ENDINGS = ("é", "ás", "á", "emos", "án")
_PAST_1S_SPELLING = {"car": "qué", "gar": "gué", "zar": "cé"}


def _verb(
    infinitive: str,
    en: str,
    frame: str,
    subjects: str,
    objects: str = "",
    *,
    pres: str | None = None,
    past: str | None = None,
    fut: str | None = None,
    loc: bool = False,
    live: bool = False,
    core: bool = False,
) -> _Verb:
    """Conjugates a verb: regular endings unless `pres`/`past` list all five forms."""
    stem, ending = infinitive[:-2], infinitive[-2:]
    present = pres.split() if pres else [stem + e for e in _PRESENT_ENDINGS[ending]]
    if past:
        preterite = past.split()
    else:
        preterite = [stem + e for e in _PAST_ENDINGS[ending]]
        spelling = _PAST_1S_SPELLING.get(infinitive[-3:])
        if spelling:
            preterite[0] = infinitive[:-3] + spelling
    future_stem = fut or infinitive
    future = [future_stem + e for e in _FUTURE_ENDINGS]
    forms = {}
    for tense, paradigm in (("pres", present), ("past", preterite), ("fut", future)):
        for slot, form in zip(_SLOTS, paradigm, strict=True):
            forms[tense, slot] = form
    # "caminamos" is both "we walk" and "we walked": keep only the present reading.
    if forms["past", "1p"] == forms["pres", "1p"]:
        del forms["past", "1p"]
    base, third, past_en = en.split("/")
    return _Verb(forms, (base, third, past_en), frame, subjects, objects, loc, live, core)


_VERBS = (
    # Intransitive.
    _verb(
        "dormir",
        "sleep/sleeps/slept",
        "intr",
        "PA",
        pres="duermo duermes duerme dormimos duermen",
        past="dormí dormiste durmió dormimos durmieron",
        loc=True,
        core=True,
    ),
    _verb("correr", "run/runs/ran", "intr", "PA", loc=True, core=True),
    _verb("caminar", "walk/walks/walked", "intr", "PA", loc=True),
    _verb("nadar", "swim/swims/swam", "intr", "PA", loc=True),
    _verb("cantar", "sing/sings/sang", "intr", "P", loc=True),
    _verb("bailar", "dance/dances/danced", "intr", "P", loc=True),
    _verb("llorar", "cry/cries/cried", "intr", "P", loc=True),
    _verb(
        "reír",
        "laugh/laughs/laughed",
        "intr",
        "P",
        pres="río ríes ríe reímos ríen",
        past="reí reíste rio reímos rieron",
        fut="reir",
        loc=True,
    ),
    _verb("trabajar", "work/works/worked", "intr", "P", loc=True, core=True),
    _verb("gritar", "shout/shouts/shouted", "intr", "P", loc=True),
    _verb("saltar", "jump/jumps/jumped", "intr", "PA", loc=True),
    _verb(
        "jugar",
        "play/plays/played",
        "intr",
        "PA",
        pres="juego juegas juega jugamos juegan",
        loc=True,
    ),
    _verb("estudiar", "study/studies/studied", "intr", "P", loc=True),
    _verb("descansar", "rest/rests/rested", "intr", "PA", loc=True),
    _verb("llegar", "arrive/arrives/arrived", "intr", "PA", core=True),
    _verb(
        "salir",
        "leave/leaves/left",
        "intr",
        "PA",
        pres="salgo sales sale salimos salen",
        fut="saldr",
    ),
    _verb(
        "volver",
        "return/returns/returned",
        "intr",
        "PA",
        pres="vuelvo vuelves vuelve volvemos vuelven",
    ),
    _verb("viajar", "travel/travels/traveled", "intr", "P"),
    _verb(
        "caer",
        "fall/falls/fell",
        "intr",
        "PAT",
        pres="caigo caes cae caemos caen",
        past="caí caíste cayó caímos cayeron",
    ),
    _verb("crecer", "grow/grows/grew", "intr", "PA", pres="crezco creces crece crecemos crecen"),
    _verb("vivir", "live/lives/lived", "intr", "PA", live=True, core=True),
    # Transitive.
    _verb("comer", "eat/eats/ate", "trans", "PA", "SF", loc=True, core=True),
    _verb("beber", "drink/drinks/drank", "trans", "PA", "D", loc=True, core=True),
    _verb(
        "ver",
        "see/sees/saw",
        "trans",
        "PA",
        "PATL",
        pres="veo ves ve vemos ven",
        past="vi viste vio vimos vieron",
        loc=True,
        core=True,
    ),
    _verb("mirar", "watch/watches/watched", "trans", "PA", "PAT", loc=True),
    _verb(
        "encontrar",
        "find/finds/found",
        "trans",
        "PA",
        "PATS",
        pres="encuentro encuentras encuentra encontramos encuentran",
        loc=True,
    ),
    _verb("comprar", "buy/buys/bought", "trans", "P", "ATSFD", loc=True, core=True),
    _verb("vender", "sell/sells/sold", "trans", "P", "ATSFD", loc=True),
    _verb(
        "traer",
        "bring/brings/brought",
        "trans",
        "P",
        "ATSFD",
        pres="traigo traes trae traemos traen",
        past="traje trajiste trajo trajimos trajeron",
    ),
    _verb("romper", "break/breaks/broke", "trans", "PA", "T", loc=True),
    _verb("abrir", "open/opens/opened", "trans", "P", "open"),
    _verb(
        "cerrar",
        "close/closes/closed",
        "trans",
        "P",
        "open",
        pres="cierro cierras cierra cerramos cierran",
    ),
    _verb("lavar", "wash/washes/washed", "trans", "P", "ATS", loc=True),
    _verb("pintar", "paint/paints/painted", "trans", "P", "TL", loc=True),
    _verb("dibujar", "draw/draws/drew", "trans", "P", "PATSL", loc=True),
    _verb("usar", "use/uses/used", "trans", "P", "T", loc=True),
    _verb("necesitar", "need/needs/needed", "trans", "PA", "TSFD", core=True),
    _verb(
        "querer",
        "want/wants/wanted",
        "trans",
        "PA",
        "TSFD",
        pres="quiero quieres quiere queremos quieren",
        past="quise quisiste quiso quisimos quisieron",
        fut="querr",
        core=True,
    ),
    _verb(
        "tener",
        "have/has/had",
        "trans",
        "PA",
        "ATS",
        pres="tengo tienes tiene tenemos tienen",
        past="tuve tuviste tuvo tuvimos tuvieron",
        fut="tendr",
        core=True,
    ),
    _verb(
        "mover",
        "move/moves/moved",
        "trans",
        "PA",
        "T",
        pres="muevo mueves mueve movemos mueven",
    ),
    _verb("empujar", "push/pushes/pushed", "trans", "PA", "PAT", loc=True),
    _verb(
        "leer",
        "read/reads/read",
        "trans",
        "P",
        "read",
        past="leí leíste leyó leímos leyeron",
        loc=True,
        core=True,
    ),
    _verb("escribir", "write/writes/wrote", "trans", "P", "read", loc=True, core=True),
    _verb("ayudar", "help/helps/helped", "trans", "PA", "PA", loc=True),
    _verb("llamar", "call/calls/called", "trans", "P", "PA"),
    _verb("visitar", "visit/visits/visited", "trans", "P", "PL"),
    _verb("abrazar", "hug/hugs/hugged", "trans", "P", "PA"),
    _verb("besar", "kiss/kisses/kissed", "trans", "P", "PA"),
    _verb(
        "oír",
        "hear/hears/heard",
        "trans",
        "PA",
        "PA",
        pres="oigo oyes oye oímos oyen",
        past="oí oíste oyó oímos oyeron",
        fut="oir",
    ),
    _verb("cortar", "cut/cuts/cut", "trans", "P", "SF"),
    _verb("esconder", "hide/hides/hid", "trans", "PA", "TS", loc=True),
    _verb("atrapar", "catch/catches/caught", "trans", "PA", "AT", loc=True),
    _verb("lanzar", "throw/throws/threw", "trans", "P", "T"),
    _verb("olvidar", "forget/forgets/forgot", "trans", "P", "T", loc=True),
    _verb(
        "perder",
        "lose/loses/lost",
        "trans",
        "PA",
        "T",
        pres="pierdo pierdes pierde perdemos pierden",
        loc=True,
    ),
    _verb("preparar", "prepare/prepares/prepared", "trans", "P", "SF"),
    # Verbs taking a "que" clause.
    _verb(
        "decir",
        "say/says/said",
        "comp",
        "P",
        pres="digo dices dice decimos dicen",
        past="dije dijiste dijo dijimos dijeron",
        fut="dir",
        core=True,
    ),
    _verb(
        "pensar",
        "think/thinks/thought",
        "comp",
        "P",
        pres="pienso piensas piensa pensamos piensan",
        core=True,
    ),
    _verb(
        "saber",
        "know/knows/knew",
        "comp",
        "P",
        pres="sé sabes sabe sabemos saben",
        past="supe supiste supo supimos supieron",
        fut="sabr",
        core=True,
    ),
    _verb(
        "creer",
        "believe/believes/believed",
        "comp",
        "P",
        past="creí creíste creyó creímos creyeron",
    ),
)

_NOUNS = _parse_nouns()
_ADJECTIVES = _parse_adjectives()


@dataclass
class _NP:
    """A noun phrase built on both sides, with what agreement needs."""

    es: list[str]
    en: list[str]
    slot: str  # Spanish verb slot
    agr: str  # English agreement: "1s", "3s" or "pl"
    gender: str
    plural: bool
    kind: str
    person: bool  # takes "who" and the personal "a"
    noun: _Noun | None = None


@dataclass
class _Predicate:
    """A verb phrase: the Spanish words, and the English verb group left open for inversion."""

    es: list[str]  # ["no"]? + finite verb (+ everything after it)
    en_verb: str  # "lex" (do-support) or "be" (conjugated by `_en_verb_group`)
    en_forms: tuple[str, str, str] | None  # base, 3rd singular, past of a "lex" verb
    en_pre: list[str]  # adverb between auxiliary and verb ("always"), affirmative only
    en_rest: list[str]  # complements after the verb
    tense: str
    negated: bool


def _fix_articles(words: list[str]) -> list[str]:
    """English "a" becomes "an" before a vowel-initial word (the lexicon has no "a university")."""
    out = list(words)
    for i in range(len(out) - 1):
        if out[i] == "a" and out[i + 1][0] in "aeiou":
            out[i] = "an"
    return out


def _join(words: list[str]) -> str:
    """Joins word tokens into text: capital first letter, no space before .,?! or after ¿¡."""
    text = ""
    for word in words:
        if not text or word in ".,?!" or text[-1] in "¿¡":
            text += word
        else:
            text += " " + word
    for i, char in enumerate(text):
        if char.isalpha():
            return text[:i] + char.upper() + text[i + 1 :]
    return text


def _en_verb_group(pred: _Predicate, agr: str) -> tuple[list[str], list[str]]:
    """English verb group split around the subject: (before subject, after subject) in questions.

    For a statement the two parts are concatenated (`before + after`) right after the subject.
    Lexical verbs take do-support whenever negated or questioned; "be" inverts itself.
    """
    tense, neg = pred.tense, pred.negated
    not_ = ["not"] if neg else []
    if pred.en_verb == "be":
        if tense == "fut":
            return ["will"], not_ + ["be"]
        if tense == "pres":
            form = {"1s": "am", "3s": "is"}.get(agr, "are")
        else:
            form = "was" if agr in ("1s", "3s") else "were"
        return [form], not_
    base = pred.en_forms[0]
    if tense == "fut":
        return ["will"], not_ + pred.en_pre + [base]
    if tense == "past":
        return ["did"], not_ + pred.en_pre + [base]
    return ["does" if agr == "3s" else "do"], not_ + pred.en_pre + [base]


def _en_statement_verb(pred: _Predicate, agr: str) -> list[str]:
    """English verb group of a statement (no inversion; do-support only under negation)."""
    if pred.en_verb == "lex" and not pred.negated and pred.tense != "fut":
        base, third, past = pred.en_forms
        form = past if pred.tense == "past" else third if agr == "3s" else base
        return pred.en_pre + [form]
    before, after = _en_verb_group(pred, agr)
    return before + after


class _Grammar:
    """Samples one sentence pair at a time from a seeded random stream."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.budget = 0  # clause embeddings still allowed in the current sentence
        self.noun_lists: dict[str, list[_Noun]] = {}
        self.kind_adjectives = {k: [a for a in _ADJECTIVES if k in a.kinds] for k in "PATSFDL"}
        self.object_nouns = {
            verb: frozenset(self.nouns_for(verb.objects))
            for verb in _VERBS
            if verb.frame == "trans"
        }

    # ---- small helpers -------------------------------------------------------------------

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def spend(self, p: float) -> bool:
        """Uses one clause embedding from the budget with probability `p`.

        Sentences drawn with a large budget (the long tail) spend it more eagerly.
        """
        if self.budget >= 4:
            p = max(p, 0.8)
        if self.budget > 0 and self.chance(p):
            self.budget -= 1
            return True
        return False

    def nouns_for(self, spec: str) -> list[_Noun]:
        """Nouns of the kinds in `spec` (letters), with the tag `spec`, or ("markL") either."""
        if spec not in self.noun_lists:
            if spec in ("read", "open", "surf", "mark"):
                nouns = [n for n in _NOUNS if spec in n.tags]
            elif spec == "markL":
                nouns = [n for n in _NOUNS if "mark" in n.tags or n.kind == "L"]
            else:
                nouns = [n for n in _NOUNS if n.kind in spec]
            self.noun_lists[spec] = nouns
        return self.noun_lists[spec]

    # ---- noun phrases ---------------------------------------------------------------------

    def noun_phrase(
        self, spec: str, role: str = "subj", plural: bool | None = None, allow_rel: bool = True
    ) -> _NP:
        """A determiner + noun + optional adjective + optional relative clause.

        `role` is "subj", "obj", "loc" (after a preposition), "exist" (after "hay") or
        "bare_pl" (no determiner, plural: "¿Cuántos gatos…").
        """
        nouns = self.nouns_for(spec)
        if plural:
            nouns = [n for n in nouns if n.es_pl is not None]
        noun = self.rng.choice(nouns)
        if plural is None:
            plural = noun.es_pl is not None and self.chance(0.35)
        plural = plural and noun.es_pl is not None
        gender = noun.gender
        es_noun = noun.es_pl if plural else noun.es_sg
        en_noun = noun.en_pl if plural else noun.en_sg
        es_det, en_det = self.determiner(noun, plural, role)
        es_adj: list[str] = []
        en_adj: list[str] = []
        if self.chance(0.3 if role != "loc" else 0.15):
            adjectives = self.kind_adjectives[noun.kind]
            adjective = self.rng.choice(adjectives)
            es_adj = [adjective.form(gender, plural)]
            en_adj = [adjective.en]
            if self.chance(0.12):
                es_adj, en_adj = ["muy"] + es_adj, ["very"] + en_adj
        np = _NP(
            es=es_det + [es_noun] + es_adj,
            en=en_det + en_adj + [en_noun],
            slot="3p" if plural else "3s",
            agr="pl" if plural else "3s",
            gender=gender,
            plural=plural,
            kind=noun.kind,
            person=noun.kind == "P",
            noun=noun,
        )
        if (
            allow_rel
            and role in ("subj", "obj", "loc")
            and self.spend(0.45 if role != "loc" else 0.2)
        ):
            es_rel, en_rel = self.relative_clause(np)
            np.es += es_rel
            np.en += en_rel
        return np

    def determiner(self, noun: _Noun, plural: bool, role: str) -> tuple[list[str], list[str]]:
        idx = (noun.gender == "f") + 2 * plural
        rng = self.rng
        if role == "bare_pl":
            return [], []
        if role == "exist" and noun.mass:
            return [], []
        if noun.mass:
            choices = ["def"] * 6 + ["this", "that", "my", "your", "our"]
            if role in ("obj", "exist"):
                choices += ["bare"] * 8
        elif role == "exist":
            choices = ["indef"] * 4
            if plural:
                choices += ["num"] * 4 + ["many", "few", "several", "bare"]
        elif "fam" in noun.tags:
            choices = ["def"] * 2 + ["my"] * 3 + ["your", "our"]
        elif role == "loc":
            choices = ["def"] * 8 + ["this", "that", "my", "our"]
        elif plural:
            choices = ["def"] * 8 + ["indef", "this", "that", "my", "your", "our", "many", "few"]
            choices += ["several", "all"] + ["num"] * 5
            if role == "obj":
                choices += ["bare"] * 3
        else:
            choices = ["def"] * 10 + ["indef"] * 5 + ["this", "that", "my", "your", "our"] * 2
        if "nopos" in noun.tags:
            choices = [c for c in choices if c not in ("my", "your", "our")]
        choice = rng.choice(choices)
        if choice == "bare":
            return [], []
        if choice == "num":
            es_num, en_num = rng.choice(_NUMBERS)
            if role != "exist" and self.chance(0.2):
                pre = rng.choice(["def", "this"] if "nopos" in noun.tags else ["def", "this", "my"])
                forms, _, en_pl = _DETERMINERS[pre]
                return [forms[idx], es_num], [en_pl] + en_num
            return [es_num], list(en_num)
        forms, en_sg, en_pl = _DETERMINERS[choice]
        return forms[idx].split(), (en_pl if plural else en_sg).split()

    def subject(self, kinds: str, allow_rel: bool = True, core: bool = True) -> _NP:
        """A subject: a pronoun or a name (people only) or a noun phrase.

        First and second person pronouns only come with `core` verbs, which keeps the number of
        rare Spanish verb forms small.
        """
        r = self.rng.random()
        if "P" in kinds and r < 0.22:
            pronouns = _PRONOUNS if core else [p for p in _PRONOUNS if p[1] in ("3s", "3p")]
            es, slot, en, agr, gender = self.rng.choice(pronouns)
            gender = gender or self.rng.choice("mf")
            plural = slot in ("1p", "3p")
            return _NP([es], [en], slot, agr, gender, plural, "P", True)
        if "P" in kinds and r < 0.36:
            gender = self.rng.choice("mf")
            name = self.rng.choice(_NAMES[gender])
            return _NP([name], [name], "3s", "3s", gender, False, "P", True)
        weights = {"P": 5, "A": 4, "T": 2, "S": 1, "F": 1, "D": 1, "L": 1}
        pool = [k for k in kinds for _ in range(weights[k])]
        return self.noun_phrase(self.rng.choice(pool), "subj", allow_rel=allow_rel)

    def object_phrase(self, spec: str) -> tuple[list[str], list[str]]:
        """An object noun phrase; people and animals take the personal "a" ("al" before "el")."""
        if "P" in spec and self.chance(0.25):
            gender = self.rng.choice("mf")
            name = self.rng.choice(_NAMES[gender])
            np = _NP([name], [name], "3s", "3s", gender, False, "P", True)
        else:
            np = self.noun_phrase(spec, "obj")
        if np.kind in "PA":
            return _contract(["a"], np.es), np.en
        return np.es, np.en

    def location(self) -> tuple[list[str], list[str]]:
        es_prep, en_prep, spec = self.rng.choice(_LOCATIONS)
        np = self.noun_phrase(spec, "loc", plural=self.chance(0.15))
        return _contract(es_prep.split(), np.es), en_prep.split() + np.en

    # ---- clauses --------------------------------------------------------------------------

    def relative_clause(self, head: _NP) -> tuple[list[str], list[str]]:
        """ "que" + predicate (subject relative) or "que" + subject + verb (object relative)."""
        tense = self.tense()
        object_verbs = [v for v, nouns in self.object_nouns.items() if head.noun in nouns]
        if not head.person and object_verbs and self.chance(0.35):
            verb = self.rng.choice(object_verbs)
            subj = self.subject(verb.subjects, allow_rel=False, core=verb.core)
            slot_ok = (tense, subj.slot) in verb.forms
            tense = tense if slot_ok else "pres"
            neg = self.chance(0.15)
            pred = _Predicate(
                (["no"] if neg else []) + [verb.forms[tense, subj.slot]],
                "lex",
                verb.en,
                [],
                [],
                tense,
                neg,
            )
            es = ["que"] + subj.es + pred.es
            en = ["that"] + subj.en + _en_statement_verb(pred, subj.agr)
            return es, en
        pred = self.predicate(head, tense, allow_comp=False)
        es = ["que"] + pred.es
        en = ["who" if head.person else "that"] + _en_statement_verb(pred, head.agr) + pred.en_rest
        return es, en

    def tense(self) -> str:
        return self.rng.choices(_TENSES, weights=(45, 35, 20))[0]

    def predicate(
        self,
        subj: _NP,
        tense: str,
        *,
        neg: bool | None = None,
        allow_comp: bool = True,
        allow_pre_adverb: bool = True,
        frames: tuple[str, ...] = ("intr", "trans", "adj", "loc", "comp"),
    ) -> _Predicate:
        """A verb phrase agreeing with `subj`: intransitive, transitive, copula or "que" clause."""
        if neg is None:
            neg = self.chance(0.2)
        weights = {"intr": 3, "trans": 5, "adj": 3, "loc": 1.2, "comp": 1.2}
        if subj.kind not in "PA":
            weights["intr"] = 0.3
        if not allow_comp or subj.kind != "P" or not self.budget:
            weights["comp"] = 0
        pool = [f for f in frames if weights[f] > 0]
        frame = self.rng.choices(pool, weights=[weights[f] for f in pool])[0]
        if frame == "comp":
            self.budget -= 1
        not_ = ["no"] if neg else []
        if frame in ("adj", "loc"):
            if frame == "adj":
                adjective = self.rng.choice(self.kind_adjectives[subj.kind])
                es_rest = [adjective.form(subj.gender, subj.plural)]
                en_rest = [adjective.en]
                if self.chance(0.15):
                    es_rest, en_rest = ["muy"] + es_rest, ["very"] + en_rest
                copula = adjective.copula
            else:
                es_rest, en_rest = self.location()
                copula = "estar"
            verb_es = _COPULAS[copula][tense][_SLOTS.index(subj.slot)]
            return _Predicate(not_ + [verb_es] + es_rest, "be", None, [], en_rest, tense, neg)

        verbs = [
            v
            for v in _VERBS
            if v.frame == frame
            and subj.kind in v.subjects
            and (v.core or subj.slot in ("3s", "3p"))
        ]
        if not verbs:
            return self.predicate(subj, tense, neg=neg, frames=("adj",))
        verb = self.rng.choice(verbs)
        if (tense, subj.slot) not in verb.forms:
            tense = "pres"
        es_pre: list[str] = []
        en_pre: list[str] = []
        if frame == "comp":
            neg, not_ = False, []
        elif allow_pre_adverb and not neg and tense != "fut" and self.chance(0.06):
            es_adv, en_adv = self.rng.choice(_PRE_ADVERBS)
            es_pre, en_pre = [es_adv], [en_adv]
        es_rest: list[str] = []
        en_rest: list[str] = []
        if frame == "trans":
            es_obj, en_obj = self.object_phrase(verb.objects)
            es_rest += es_obj
            en_rest += en_obj
        elif frame == "comp":
            clause_tense = "past" if tense == "past" else self.tense()
            es_clause, en_clause = self.statement(clause_tense)
            es_rest += ["que"] + es_clause
            en_rest += ["that"] + en_clause
        if verb.live:
            np = self.noun_phrase("L", "loc")
            es_rest += _contract(["en"], np.es)
            en_rest += ["in"] + np.en
        elif verb.loc and self.chance(0.2):
            es_loc, en_loc = self.location()
            es_rest += es_loc
            en_rest += en_loc
        elif frame != "comp" and self.chance(0.15):
            options = [
                a
                for a in _ADVERBS
                if tense in a[2].split() and (frame == "intr" or a[0] != "mucho")
            ]
            es_adv, en_adv, _ = self.rng.choice(options)
            es_rest.append(es_adv)
            en_rest += en_adv.split()
        return _Predicate(
            not_ + es_pre + [verb.forms[tense, subj.slot]] + es_rest,
            "lex",
            verb.en,
            en_pre,
            en_rest,
            tense,
            neg,
        )

    def statement(self, tense: str) -> tuple[list[str], list[str]]:
        """A declarative clause: subject + predicate (or an existential "hay" clause)."""
        if self.chance(0.1):
            return self.existential(tense, neg=self.chance(0.2))
        kinds = self.rng.choices(["P", "PA", "PATSFDL"], weights=(5, 3, 2))[0]
        subj = self.subject(kinds)
        pred = self.predicate(subj, tense)
        en = subj.en + _en_statement_verb(pred, subj.agr) + pred.en_rest
        return subj.es + pred.es, en

    def existential(self, tense: str, neg: bool) -> tuple[list[str], list[str]]:
        """ "Hay tres gatos en el jardín" → "There are three cats in the garden"."""
        es_loc, en_loc = self.location()
        if neg:
            spec = self.rng.choice(["PATS", "FD"])
            np = self.noun_phrase(spec, "bare_pl", plural=spec != "FD")
            agr = "pl" if np.plural else "3s"
            be = _en_be_statement(tense, agr)
            return ["no", _HABER[tense]] + np.es + es_loc, ["there"] + be + ["no"] + np.en + en_loc
        np = self.noun_phrase("PATSFD", "exist")
        be = _en_be_statement(tense, np.agr)
        return [_HABER[tense]] + np.es + es_loc, ["there"] + be + np.en + en_loc

    # ---- sentences ------------------------------------------------------------------------

    def sentence(self) -> tuple[str, str]:
        budgets, weights = zip(*_BUDGET_WEIGHTS.items(), strict=True)
        self.budget = self.rng.choices(budgets, weights=weights)[0]
        r = self.rng.random()
        if r < 0.62:
            es, en = self.compound_statement()
            return _join(es + ["."]), _join(_fix_articles(en + ["."]))
        if r < 0.78:
            es, en = self.yes_no_question()
        else:
            es, en = self.wh_question()
        return _join(["¿"] + es + ["?"]), _join(_fix_articles(en + ["?"]))

    def compound_statement(self) -> tuple[list[str], list[str]]:
        """A statement, optionally joined to more clauses by conjunctions.

        "cuando" keeps both clauses in one tense (present or past), "si" takes a present clause
        with a present or future main clause, "mientras" is present only: the tenses where
        Spanish keeps the indicative.
        """
        tense = self.tense()
        if not self.spend(0.55):
            return self.statement(tense)
        conj = self.rng.choice(list(_CONJUNCTIONS))
        if conj == "cuando":
            tense = self.rng.choice(["pres", "past"])
            sub_tense = tense
        elif conj == "si":
            tense = self.rng.choice(["pres", "fut"])
            sub_tense = "pres"
        elif conj == "mientras":
            tense = sub_tense = "pres"
        else:
            sub_tense = self.tense()
        es_main, en_main = self.statement(tense)
        es_sub, en_sub = self.statement(sub_tense)
        if conj in ("cuando", "si", "aunque", "mientras") and self.chance(0.4):
            es = [conj] + es_sub + [","] + es_main
            en = [_CONJUNCTIONS[conj]] + en_sub + [","] + en_main
        else:
            comma = [","] if conj == "pero" else []
            es = es_main + comma + [conj] + es_sub
            en = en_main + comma + [_CONJUNCTIONS[conj]] + en_sub
        while self.spend(0.5):
            conj = self.rng.choice(["porque", "pero", "y"])
            comma = [","] if conj == "pero" else []
            es_more, en_more = self.statement(self.tense())
            es += comma + [conj] + es_more
            en += comma + [_CONJUNCTIONS[conj]] + en_more
        return es, en

    def yes_no_question(self) -> tuple[list[str], list[str]]:
        """ "¿El gato come pescado?" → "Does the cat eat fish?" (also "hay" → "is there")."""
        tense = self.tense()
        neg = self.chance(0.12)
        if self.chance(0.1):
            es_loc, en_loc = self.location()
            np = self.noun_phrase("PATSFD", "exist")
            be = _en_be_statement(tense, np.agr)
            return [_HABER[tense]] + np.es + es_loc, be[:1] + ["there"] + be[1:] + np.en + en_loc
        kinds = self.rng.choices(["P", "PA", "PATSFDL"], weights=(5, 3, 2))[0]
        # No relative clause on the subject: the auxiliary in front depends on the verb after it.
        subj = self.subject(kinds, allow_rel=False)
        pred = self.predicate(subj, tense, neg=neg, allow_pre_adverb=False)
        before, after = _en_verb_group(pred, subj.agr)
        es = subj.es + pred.es
        en = before + subj.en + after + pred.en_rest
        if self.spend(0.3):
            conj, en_conj = self.rng.choice([("porque", "because"), ("cuando", "when")])
            if tense == "fut":
                conj, en_conj = "porque", "because"
            es_sub, en_sub = self.statement(tense if conj == "cuando" else self.tense())
            es += [conj] + es_sub
            en += [en_conj] + en_sub
        return es, en

    def wh_question(self) -> tuple[list[str], list[str]]:
        """Questions with qué, quién, dónde, cuándo, por qué, cuántos and de qué color."""
        kind = self.rng.choices(
            ["que", "quien", "donde", "cuando", "porque", "cuantos", "color"],
            weights=(5, 4, 4, 3, 3, 3, 1.5),
        )[0]
        tense = self.tense()
        if kind == "quien":
            head = _NP([], [], "3s", "3s", "m", False, "P", True)
            pred = self.predicate(head, tense, neg=self.chance(0.12), allow_pre_adverb=False)
            return ["quién"] + pred.es, ["who"] + _en_statement_verb(pred, "3s") + pred.en_rest
        if kind == "cuantos":
            return self.how_many(tense)
        if kind == "color":
            subj = self.noun_phrase("AT", "subj", allow_rel=False)
            verb_es = _COPULAS["ser"][tense][_SLOTS.index(subj.slot)]
            pred = _Predicate([verb_es], "be", None, [], [], tense, False)
            before, after = _en_verb_group(pred, subj.agr)
            es = ["de", "qué", "color", verb_es] + subj.es
            return es, ["what", "color"] + before + subj.en + after
        if kind == "donde":
            subj = self.subject(self.rng.choice(["P", "PA", "PAT"]), allow_rel=False)
            if self.chance(0.5) or subj.kind not in "PA":
                verb_es = _COPULAS["estar"][tense][_SLOTS.index(subj.slot)]
                pred = _Predicate([verb_es], "be", None, [], [], tense, False)
            else:
                verb = self.rng.choice(
                    [
                        v
                        for v in _VERBS
                        if v.frame == "intr"
                        and (v.loc or v.live)
                        and subj.kind in v.subjects
                        and (v.core or subj.slot in ("3s", "3p"))
                    ]
                )
                if (tense, subj.slot) not in verb.forms:
                    tense = "pres"
                pred = _Predicate(
                    [verb.forms[tense, subj.slot]], "lex", verb.en, [], [], tense, False
                )
            before, after = _en_verb_group(pred, subj.agr)
            return ["dónde"] + pred.es + subj.es, ["where"] + before + subj.en + after
        if kind == "que":
            verbs = [
                v for v, nouns in self.object_nouns.items() if any(n.kind in "TSFDL" for n in nouns)
            ]
            verb = self.rng.choice(verbs)
            subj = self.subject(verb.subjects, allow_rel=False, core=verb.core)
            if (tense, subj.slot) not in verb.forms:
                tense = "pres"
            pred = _Predicate([verb.forms[tense, subj.slot]], "lex", verb.en, [], [], tense, False)
            before, after = _en_verb_group(pred, subj.agr)
            return ["qué"] + pred.es + subj.es, ["what"] + before + subj.en + after
        # "cuándo" and "por qué": verb first, then subject, then complements ("¿Por qué come
        # Ana pan?"); a predicate adjective goes before the subject ("¿Por qué está triste Ana?")
        # so that it cannot be read as an adjective of the subject.
        subj = self.subject(self.rng.choices(["P", "PA"], weights=(3, 1))[0], allow_rel=False)
        neg = kind == "porque" and self.chance(0.25)
        frames = ("intr", "trans") if kind == "cuando" else ("intr", "trans", "adj")
        pred = self.predicate(subj, tense, neg=neg, allow_pre_adverb=False, frames=frames)
        before, after = _en_verb_group(pred, subj.agr)
        split = len(pred.es) if pred.en_verb == "be" else 2 if neg else 1
        es_wh = ["cuándo"] if kind == "cuando" else ["por", "qué"]
        en_wh = ["when"] if kind == "cuando" else ["why"]
        es = es_wh + pred.es[:split] + subj.es + pred.es[split:]
        return es, en_wh + before + subj.en + after + pred.en_rest

    def how_many(self, tense: str) -> tuple[list[str], list[str]]:
        """ "¿Cuántos gatos hay en el jardín?" / "¿Cuántos libros tiene Ana?"."""
        if self.chance(0.5):
            np = self.noun_phrase("PATS", "bare_pl", plural=True)
            es_q = ["cuántos" if np.gender == "m" else "cuántas"]
            es_loc, en_loc = self.location()
            be = _en_be_statement(tense, "pl")
            en = ["how", "many"] + np.en + be[:1] + ["there"] + be[1:] + en_loc
            return es_q + np.es + [_HABER[tense]] + es_loc, en
        verbs = [v for v in _VERBS if v.frame == "trans" and set(v.objects) & set("ATS")]
        verb = self.rng.choice(verbs)
        spec = "".join(k for k in verb.objects if k in "ATS")
        np = self.noun_phrase(spec, "bare_pl", plural=True)
        subj = self.subject(verb.subjects, allow_rel=False, core=verb.core)
        if (tense, subj.slot) not in verb.forms:
            tense = "pres"
        pred = _Predicate([verb.forms[tense, subj.slot]], "lex", verb.en, [], [], tense, False)
        before, after = _en_verb_group(pred, subj.agr)
        es_q = ["cuántos" if np.gender == "m" else "cuántas"]
        es = es_q + np.es + pred.es + subj.es
        return es, ["how", "many"] + np.en + before + subj.en + after


def _en_be_statement(tense: str, agr: str) -> list[str]:
    if tense == "fut":
        return ["will", "be"]
    if tense == "pres":
        return ["is" if agr == "3s" else "are"]
    return ["was" if agr == "3s" else "were"]


def _contract(prep: list[str], np_es: list[str]) -> list[str]:
    """Preposition + noun phrase with "a el" → "al" and "de el" → "del"."""
    if prep and prep[-1] in ("a", "de") and np_es and np_es[0] == "el":
        return prep[:-1] + [prep[-1] + "l"] + np_es[1:]
    return prep + np_es


def generate_pairs(num_pairs: int = 30000, seed: int = 0) -> list[tuple[str, str]]:
    """Generates distinct (Spanish, English) sentence pairs from the grammar.

    The same `seed` always gives the same list, and a shorter list is a prefix of a longer one
    with the same seed. Sources are distinct; the English side is a function of the Spanish.

    Args:
        num_pairs: how many pairs to return.
        seed: seed of the random stream driving the grammar.

    Returns:
        A list of `(spanish, english)` strings with natural casing and punctuation.

    Example:

    >>> pairs = generate_pairs(3, seed=0)
    >>> len(pairs), len({es for es, _ in pairs})
    (3, 3)
    >>> pairs == generate_pairs(3, seed=0)
    True
    """
    if num_pairs < 0:
        raise ValueError(f"Expected num_pairs >= 0. Received: num_pairs={num_pairs}")
    grammar = _Grammar(seed)
    seen: set[str] = set()
    pairs: list[tuple[str, str]] = []
    while len(pairs) < num_pairs:
        es, en = grammar.sentence()
        if es not in seen:
            seen.add(es)
            pairs.append((es, en))
    return pairs


def load_splits(
    seed: int = 0, num_pairs: int = 30000, dev_size: int = 1000, test_size: int = 1000
) -> dict[str, list[tuple[str, str]]]:
    """Generates the corpus and splits it into disjoint train/dev/test lists.

    Sources are distinct across the whole corpus, so no Spanish sentence is in two splits. The
    pairs are in generation order, which is already random: dev takes the first `dev_size`, test
    the next `test_size`, train the rest.

    Args:
        seed: seed of the generator.
        num_pairs: total number of pairs over the three splits.
        dev_size: number of dev pairs.
        test_size: number of test pairs.

    Returns:
        `{"train": [...], "dev": [...], "test": [...]}` of `(spanish, english)` pairs.

    Example:

    >>> splits = load_splits(num_pairs=50, dev_size=5, test_size=5)
    >>> {name: len(pairs) for name, pairs in splits.items()}
    {'train': 40, 'dev': 5, 'test': 5}
    """
    if dev_size < 0 or test_size < 0 or dev_size + test_size >= num_pairs:
        raise ValueError(
            "Expected 0 <= dev_size + test_size < num_pairs. Received: "
            f"num_pairs={num_pairs}, dev_size={dev_size}, test_size={test_size}"
        )
    pairs = generate_pairs(num_pairs, seed)
    return {
        "train": pairs[dev_size + test_size :],
        "dev": pairs[:dev_size],
        "test": pairs[dev_size : dev_size + test_size],
    }
