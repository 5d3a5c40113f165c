"""Four published text classifiers on one real task: where does a sentence come from?

    python examples/text_classification.py [--task source|language|synthetic] [--quick]
                                           [--out text_classification]

Tasks (`keras_attn.text.classification.TASKS`), built from the installed corpora (`make corpora`):

- `source` (default): the English side of a pair — is it a dictionary example sentence (Ding,
  `ding-de-en`), a Bible verse (`bible-es-en`) or a LibreOffice help paragraph
  (`libreoffice-es-en`)? 3 classes.
- `language`: German (Ding), English (any of the three) or Spanish (Bible, help)? 3 classes.
- `synthetic`: Spanish or English side of the generated corpus (`keras_attn.text.synthetic`);
  needs nothing installed.

Train sentences come from the corpora's train splits, test sentences from their test splits,
the same number per class. The four classifiers:

- `text_cnn` — Kim (2014), `--kim-variant` (default non-static). The "pre-trained" vectors of
  the static / non-static / multichannel variants are learned here without labels from the
  training sentences (PPMI + truncated SVD of the word co-occurrences, window 2);
- `char_cnn` — Zhang, Zhao & LeCun (2015), small, one-hot characters (the paper's alphabet plus
  the letters the training text adds, e.g. ñ, ü), `--char-length` characters read backward;
- `han` — Yang et al. (2016): each sentence split into clauses after , ; : . ! ? (the
  "sentences" of the hierarchy), word GRU + attention, clause GRU + attention;
- `bert` — a 2-layer BERT encoder + [CLS] classifier trained from scratch (no pre-training).

Prints the test accuracy of each and writes to `--out`: `saliency_<model>.png` (per token
|∂ logit of the predicted class / ∂ input embedding|, Simonyan et al., 2013, arXiv:1312.6034),
`han_attention.png` (HAN word and clause weights), both for one test sentence per class (the
first with two clauses or more, if any), `tsne_text_cnn.png` and `results.md`.

`tsne_text_cnn.png` is the t-SNE map (van der Maaten & Hinton, 2008; scikit-learn's `TSNE`) of
the CNN's document embeddings, its max-pooled features, of the test sentences, before and after
training, coloured by class; the script prints the silhouette of the classes (Rousseeuw, 1987;
from -1 to 1, higher when each class forms its own cluster) of both models, in the embeddings
(cosine distance) and in the 2-D map.

References:
    Kim, 2014, "Convolutional neural networks for sentence classification", arXiv:1408.5882.
    Zhang, Zhao & LeCun, 2015, "Character-level convolutional networks for text
    classification", arXiv:1509.01626.
    Yang et al., 2016, "Hierarchical attention networks for document classification", NAACL.
    Devlin et al., 2019, "BERT: pre-training of deep bidirectional transformers for language
    understanding", arXiv:1810.04805.
    Simonyan et al., 2013, "Deep inside convolutional networks: visualising image
    classification models and saliency maps", arXiv:1312.6034.
    van der Maaten & Hinton, 2008, "Visualizing data using t-SNE", JMLR 9.
    Rousseeuw, 1987, "Silhouettes: a graphical aid to the interpretation and validation of
    cluster analysis", J. Comput. Appl. Math. 20.
"""

from __future__ import annotations

import argparse
import collections
import re
import sys
import time
from pathlib import Path

import keras
import matplotlib
import numpy as np
import tensorflow as tf
from sklearn.manifold import TSNE
from sklearn.metrics import silhouette_score

from keras_attn.models import bert, bert_classifier, char_cnn, han_classifier, text_cnn
from keras_attn.models.han_classifier import han_attention_weights
from keras_attn.models.text_cnn.model import FEATURES as TEXT_CNN_FEATURES
from keras_attn.text.augmentation import THESAURI, augment_examples, load_thesaurus
from keras_attn.text.characters import ZHANG_ALPHABET, encode_characters
from keras_attn.text.classification import TASK_ALIASES, TASKS
from keras_attn.text.corpora import SIDES, CorpusNotInstalledError, language_codes, load_corpus
from keras_attn.text.synthetic import generate_pairs

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PAD, UNK, CLS = 0, 1, 2
MODELS = ("text_cnn", "char_cnn", "han", "bert")
_TOKEN = re.compile(r"\w+|[^\w\s]")
_CLAUSE_END = frozenset(",;:.!?")


def tokenize(text: str) -> list[str]:
    """Lower-cased words and punctuation marks."""
    return _TOKEN.findall(text.lower())


def load_task(
    task: str, train_per_class: int, test_per_class: int, seed: int
) -> tuple[list[str], np.ndarray, list[str], np.ndarray, list[str]]:
    """`(train_texts, train_labels, test_texts, test_labels, class_names)`, balanced classes.

    The classes and their sentences' corpora are those of `keras_attn.text.classification.TASKS`;
    `per_class` sentences of each are drawn from the corpora's train and test splits.
    """
    rng = np.random.default_rng(seed)
    splits_of: dict[str, dict] = {}
    data = {"train": ([], []), "test": ([], [])}
    classes = TASKS[TASK_ALIASES[task]]
    class_names = list(classes)
    for label, name in enumerate(class_names):
        for split, per_class in (("train", train_per_class), ("test", test_per_class)):
            sources = classes[name]
            texts = []
            for corpus, side in sources:
                if corpus not in splits_of:
                    if corpus == "synthetic":
                        pairs = generate_pairs(4 * (train_per_class + test_per_class), seed=seed)
                        cut = len(pairs) // 2
                        splits_of[corpus] = {"train": pairs[:cut], "test": pairs[cut:]}
                    else:
                        splits_of[corpus] = load_corpus(corpus)
                column = SIDES.index(side)
                candidates = sorted({pair[column] for pair in splits_of[corpus][split]})
                share = -(-per_class // len(sources))
                chosen = rng.choice(len(candidates), min(share, len(candidates)), replace=False)
                texts += [candidates[i] for i in chosen]
            texts = [texts[i] for i in rng.permutation(len(texts))[:per_class]]
            data[split][0].extend(texts)
            data[split][1].extend([label] * len(texts))
    (train_texts, train_labels), (test_texts, test_labels) = data["train"], data["test"]
    order = rng.permutation(len(train_texts))
    return (
        [train_texts[i] for i in order],
        np.asarray(train_labels)[order],
        test_texts,
        np.asarray(test_labels),
        class_names,
    )


def augment_task(task, class_names, texts, labels, copies, seed):
    """The training sentences with `copies` thesaurus copies of each sentence whose class is in
    English or Spanish (`keras_attn.text.augmentation`), shuffled again."""
    thesauri = {}
    out_texts, out_labels = list(texts), list(labels)
    classes = TASKS[TASK_ALIASES[task]]
    for label, name in enumerate(class_names):
        languages = {language_codes(corpus)[SIDES.index(side)] for corpus, side in classes[name]}
        if len(languages) != 1 or next(iter(languages)) not in THESAURI:
            continue  # no thesaurus for its language (German)
        language = languages.pop()
        if language not in thesauri:
            thesauri[language] = load_thesaurus(language)
        members = [text for text, y in zip(texts, labels, strict=True) if y == label]
        added, _ = augment_examples(
            members, [label] * len(members), thesauri[language], copies, seed
        )
        out_texts += added[len(members) :]
        out_labels += [label] * (len(added) - len(members))
    order = np.random.default_rng(seed).permutation(len(out_texts))
    return [out_texts[i] for i in order], np.asarray(out_labels)[order]


def build_vocabulary(token_lists: list[list[str]], size: int) -> dict[str, int]:
    """The `size - 3` most frequent tokens, from id 3 (0 padding, 1 unknown, 2 [CLS])."""
    counts = collections.Counter(token for tokens in token_lists for token in tokens)
    return {token: i + 3 for i, (token, _) in enumerate(counts.most_common(size - 3))}


def encode_words(token_lists, vocabulary, length, cls=False) -> np.ndarray:
    """Right-padded ids `(N, length)`, with [CLS] first if `cls`."""
    ids = np.zeros((len(token_lists), length), "int32")
    for row, tokens in enumerate(token_lists):
        row_ids = ([CLS] if cls else []) + [vocabulary.get(t, UNK) for t in tokens]
        ids[row, : min(length, len(row_ids))] = row_ids[:length]
    return ids


def clauses(tokens: list[str], max_clauses: int) -> list[list[str]]:
    """Split after , ; : . ! ?; clauses past `max_clauses` join the last one."""
    parts = [[]]
    for token in tokens:
        parts[-1].append(token)
        if token in _CLAUSE_END:
            parts.append([])
    parts = [part for part in parts if part]
    head, tail = parts[: max_clauses - 1], parts[max_clauses - 1 :]
    return head + ([sum(tail, [])] if tail else [])


def encode_documents(token_lists, vocabulary, max_clauses, max_words) -> np.ndarray:
    """Ids `(N, max_clauses, max_words)` of each sentence's clauses, 0-padded."""
    ids = np.zeros((len(token_lists), max_clauses, max_words), "int32")
    for row, tokens in enumerate(token_lists):
        for s, clause in enumerate(clauses(tokens, max_clauses)):
            clause_ids = [vocabulary.get(t, UNK) for t in clause[:max_words]]
            ids[row, s, : len(clause_ids)] = clause_ids
    return ids


def char_alphabet(texts: list[str], min_count: int = 5) -> str:
    """Zhang et al.'s alphabet plus the characters outside it seen `min_count` times."""
    counts = collections.Counter(c for text in texts for c in text.lower())
    extra = sorted(c for c, n in counts.items() if n >= min_count and c not in ZHANG_ALPHABET)
    return ZHANG_ALPHABET + "".join(c for c in extra if not c.isspace())


def ppmi_svd_embeddings(
    token_lists, vocabulary, size: int, dim: int, rows: int, seed: int
) -> np.ndarray:
    """Unsupervised word vectors: truncated SVD of the PPMI matrix of the `rows` commonest words.

    Co-occurrences within 2 tokens; `U_k sqrt(S_k)` scaled to the std of U[-0.25, 0.25]; the
    other words (and padding) get U[-0.25, 0.25] vectors, as Kim does for unknown words.
    """
    rng = np.random.default_rng(seed)
    vectors = rng.uniform(-0.25, 0.25, size=(size, dim)).astype("float32")
    counts = np.zeros((rows, rows), "float64")
    for tokens in token_lists:
        ids = [vocabulary.get(t, UNK) - 3 for t in tokens]
        for offset in (1, 2):
            for a, b in zip(ids, ids[offset:], strict=False):
                if 0 <= a < rows and 0 <= b < rows:
                    counts[a, b] += 1
                    counts[b, a] += 1
    total = counts.sum()
    row_sums, col_sums = counts.sum(1, keepdims=True), counts.sum(0, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        pmi = np.log(counts * total / (row_sums * col_sums))
    ppmi = np.nan_to_num(np.maximum(pmi, 0.0), posinf=0.0).astype("float32")
    # Randomized SVD: a range finder with two power iterations.
    basis = np.linalg.qr(ppmi @ rng.normal(size=(rows, dim + 10)).astype("float32"))[0]
    for _ in range(2):
        basis = np.linalg.qr(ppmi @ (ppmi.T @ basis))[0]
    u, s, _ = np.linalg.svd(basis.T @ ppmi, full_matrices=False)
    learned = (basis @ u)[:, :dim] * np.sqrt(s[:dim])
    learned *= (0.5 / np.sqrt(12.0)) / (learned.std() + 1e-12)
    vectors[3 : 3 + rows] = learned[: size - 3]
    return vectors


def embedding_saliency(model: keras.Model, inputs: np.ndarray, layer_names: list[str]):
    """|∂ logit of the predicted class / ∂ e| at each position, e the named layers' outputs.

    Runs `model` eagerly with its embedding layers' outputs watched by a gradient tape; several
    layers (channels) are joined along their last axis. Returns `(predictions, saliency)`,
    saliency `(batch, *positions, d)`.
    """
    layers = [model.get_layer(name) for name in layer_names]
    watched = []

    with tf.GradientTape() as tape:

        def watching(original):
            def call(*args, **kwargs):
                output = original(*args, **kwargs)
                tape.watch(output)
                watched.append(output)
                return output

            return call

        for layer in layers:
            object.__setattr__(layer, "call", watching(layer.call))
        try:
            logits = model(inputs, training=False)
        finally:
            for layer in layers:
                object.__delattr__(layer, "call")
        predictions = tf.argmax(logits, axis=-1)
        chosen = tf.reduce_sum(tf.gather(logits, predictions, axis=1, batch_dims=1))
    gradients = tape.gradient(chosen, watched)
    saliency = tf.concat([tf.abs(g) for g in gradients], axis=-1)
    return predictions.numpy(), saliency.numpy()


def document_embeddings(model: keras.Model, inputs: np.ndarray) -> np.ndarray:
    """The text CNN's document vectors: its max-pooled convolution features, `(n, features)`."""
    features = keras.Model(model.inputs, model.get_layer(TEXT_CNN_FEATURES).output)
    return np.asarray(features.predict(inputs, batch_size=256, verbose=0), np.float64)


def plot_tsne(path, maps, labels, class_names, title):
    """One scatter plot per `(caption, 2-D points)` of `maps`, points coloured by class."""
    fig, axes = plt.subplots(1, len(maps), figsize=(5.5 * len(maps), 5))
    for ax, (caption, points) in zip(np.atleast_1d(axes), maps, strict=True):
        for k, name in enumerate(class_names):
            ax.scatter(*points[labels == k].T, s=8, label=name)
        ax.set_title(caption, fontsize=10)
        ax.set_xticks([]), ax.set_yticks([])
    np.atleast_1d(axes)[0].legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def train(model, x, y, epochs, batch_size, learning_rate, seed):
    keras.utils.set_random_seed(seed)
    model.compile(
        keras.optimizers.Adam(learning_rate),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    started = time.perf_counter()
    model.fit(x, y, batch_size=batch_size, epochs=epochs, verbose=0)
    return time.perf_counter() - started


def plot_saliency(path, rows, title):
    """One heat strip per example: `rows` = [(labels, per-position saliency, caption)]."""
    figure, axes = plt.subplots(len(rows), 1, figsize=(12, 1.3 * len(rows) + 0.6), squeeze=False)
    for axis, (labels, values, caption) in zip(axes[:, 0], rows, strict=True):
        axis.imshow(values[None], cmap="Reds", aspect="auto")
        axis.set_xticks(range(len(labels)), labels, rotation=90, fontsize=7)
        axis.set_yticks([])
        axis.set_title(caption, fontsize=8, loc="left")
    figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)


def plot_han_attention(path, documents, title):
    """Word weights (cells) and clause weights (left column) for each document."""
    figure, axes = plt.subplots(len(documents), 1, figsize=(12, 2.0 * len(documents) + 0.6))
    axes = np.atleast_1d(axes)
    for axis, (words, word_weights, sentence_weights, caption) in zip(axes, documents, strict=True):
        grid = np.concatenate([sentence_weights[:, None], word_weights], axis=1)
        axis.imshow(grid, cmap="Blues", vmin=0, vmax=1, aspect="auto")
        for s, clause in enumerate(words):
            axis.text(0, s, f"{sentence_weights[s]:.2f}", ha="center", va="center", fontsize=7)
            for w, word in enumerate(clause):
                axis.text(w + 1, s, word, ha="center", va="center", fontsize=6)
        axis.axvline(0.5, color="black", linewidth=1)
        axis.set_xticks([])
        axis.set_yticks([])
        axis.set_title(caption, fontsize=8, loc="left")
    figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=sorted(TASK_ALIASES), default="source")
    parser.add_argument("--out", default="text_classification", help="output directory")
    parser.add_argument("--quick", action="store_true", help="small data and models, 2 epochs")
    # Sizes: (default, --quick); a flag given on the command line wins over both.
    sizes = {
        "train_per_class": (3000, 300),
        "test_per_class": (500, 100),
        "epochs": (3, 2),
        "vocab": (20000, 3000),
        "max_words": (48, 48),
        "char_length": (256, 150),
        "dim": (100, 32),
        "num_filters": (100, 32),
        "units": (50, 16),
        "bert_width": (128, 32),
    }
    helps = {
        "char_length": "characters the char CNN reads",
        "dim": "word vector / embedding size",
        "num_filters": "Kim maps per width",
        "units": "HAN GRU units per direction",
    }
    for name in sizes:
        flag = "--" + name.replace("_", "-")
        parser.add_argument(flag, type=int, default=None, help=helps.get(name))
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated subset")
    parser.add_argument(
        "--kim-variant",
        choices=["rand", "static", "non-static", "multichannel"],
        default="non-static",
    )
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--augment",
        type=int,
        default=0,
        help="thesaurus augmentation (Zhang et al., 2015): add this many copies of each English "
        "or Spanish training sentence with words replaced by synonyms (make corpora installs the "
        "thesauri; default: 0, none)",
    )
    args = parser.parse_args(argv)
    if args.augment < 0:
        parser.error("--augment must be >= 0")
    for name, (default, quick) in sizes.items():
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else default)
        elif getattr(args, name) <= 0:
            parser.error(f"--{name.replace('_', '-')} must be positive")
    models = args.models.split(",")
    unknown = sorted(set(models) - set(MODELS))
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; expected some of {', '.join(MODELS)}")
    args.models = models
    if args.char_length < 123:
        parser.error("--char-length must be at least 123 (what the char CNN's 6 convolutions need)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        train_texts, y_train, test_texts, y_test, class_names = load_task(
            args.task, args.train_per_class, args.test_per_class, args.seed
        )
    except CorpusNotInstalledError as error:
        print(f"text_classification.py: error: {error}", file=sys.stderr)
        return 2
    if args.augment:
        try:
            train_texts, y_train = augment_task(
                args.task, class_names, train_texts, y_train, args.augment, args.seed
            )
        except CorpusNotInstalledError as error:
            print(f"text_classification.py: error: {error}", file=sys.stderr)
            return 2
    counts = ", ".join(f"{name} {int((y_train == k).sum())}" for k, name in enumerate(class_names))
    print(f"task {args.task}: train {len(train_texts)} ({counts}), test {len(test_texts)}")
    train_tokens = [tokenize(text) for text in train_texts]
    test_tokens = [tokenize(text) for text in test_texts]
    vocabulary = build_vocabulary(train_tokens, args.vocab)
    vocabulary_size = len(vocabulary) + 3
    num_classes = len(class_names)
    words_of = {v: k for k, v in vocabulary.items()} | {UNK: "<unk>", CLS: "[CLS]"}
    alphabet = char_alphabet(train_texts)
    max_clauses, clause_words = 4, 24
    inputs = {
        "text_cnn": lambda tokens, texts: encode_words(tokens, vocabulary, args.max_words),
        "char_cnn": lambda tokens, texts: encode_characters(texts, alphabet, args.char_length),
        "han": lambda tokens, texts: encode_documents(
            tokens, vocabulary, max_clauses, clause_words
        ),
        "bert": lambda tokens, texts: encode_words(tokens, vocabulary, args.max_words + 1, True),
    }
    print(f"vocabulary {vocabulary_size} words, alphabet {len(alphabet)} characters")

    def build(name):
        if name == "text_cnn":
            embeddings = None
            if args.kim_variant != "rand":
                rows = min(5000, vocabulary_size - 3)
                embeddings = ppmi_svd_embeddings(
                    train_tokens, vocabulary, vocabulary_size, args.dim, rows, args.seed
                )
            model = text_cnn(
                vocabulary_size,
                num_classes,
                variant=args.kim_variant,
                embedding_dim=args.dim,
                embeddings=embeddings,
                num_filters=args.num_filters,
            )
            layers = ["embedding"] + (
                ["static_embedding"] if args.kim_variant == "multichannel" else []
            )
            return model, layers, 1e-3
        if name == "char_cnn":
            return char_cnn(num_classes, len(alphabet), args.char_length), ["char_embedding"], 5e-4
        if name == "han":
            model = han_classifier(
                vocabulary_size,
                num_classes,
                embedding_dim=args.dim,
                word_units=args.units,
                sentence_units=args.units,
            )
            return model, ["embedding"], 2e-3
        width = args.bert_width
        backbone = bert(
            vocabulary_size,
            num_layers=2,
            d_model=width,
            num_heads=4,
            ff_dim=4 * width,
            max_length=args.max_words + 1,
        )
        return bert_classifier(backbone, num_classes), ["embedding"], 5e-4

    # One test sentence per class for the maps: the first with two clauses or more, if any.
    shown = []
    for k in range(num_classes):
        members = np.flatnonzero(y_test == k)
        several = [i for i in members if len(clauses(test_tokens[i], max_clauses)) > 1]
        shown.append(int((several or members)[0]))
    results = []
    for name in args.models:
        x_train = inputs[name](train_tokens, train_texts)
        x_test = inputs[name](test_tokens, test_texts)
        keras.utils.set_random_seed(args.seed)  # initial weights follow --seed
        model, embedding_layers, learning_rate = build(name)
        if name == "text_cnn":
            untrained = document_embeddings(model, x_test)
        seconds = train(
            model, x_train, y_train, args.epochs, args.batch_size, learning_rate, args.seed
        )
        accuracy = float(model.evaluate(x_test, y_test, batch_size=256, verbose=0)[1])
        results.append((name, model.count_params(), seconds, accuracy))
        print(
            f"{name:9s} test accuracy {accuracy:.3f}  ({model.count_params():,} parameters, "
            f"trained in {seconds:.0f} s)",
            flush=True,
        )
        if name == "text_cnn":
            maps = []
            for state, vectors in (("untrained", untrained), ("trained", None)):
                if vectors is None:
                    vectors = document_embeddings(model, x_test)
                tsne = TSNE(2, perplexity=min(30.0, (len(vectors) - 1) / 3), random_state=args.seed)
                points = tsne.fit_transform(vectors)
                cosine = float(silhouette_score(vectors, y_test, metric="cosine"))
                in_map = float(silhouette_score(points, y_test))
                print(
                    f"text_cnn document embeddings, {state}: class silhouette {cosine:.3f} "
                    f"(cosine), {in_map:.3f} in the t-SNE map"
                )
                maps.append((f"{state} (silhouette in the map {in_map:.2f})", points))
            plot_tsne(
                out / "tsne_text_cnn.png",
                maps,
                y_test,
                class_names,
                "t-SNE of the text CNN's document embeddings (test sentences)",
            )
        predictions, saliency = embedding_saliency(model, x_test[shown], embedding_layers)
        per_position = np.linalg.norm(saliency, axis=-1)  # (n, *positions)
        rows = []
        for i, index in enumerate(shown):
            caption = (
                f"true {class_names[y_test[index]]}, predicted {class_names[predictions[i]]}: "
                f"{test_texts[index][:110]}"
            )
            if name == "char_cnn":
                count = min(len(test_texts[index]), args.char_length)
                # The model reads backward: flip back to reading order.
                labels = list(test_texts[index].lower()[:count])
                values = per_position[i, :count][::-1]
            elif name == "han":
                ids = x_test[index]
                real = ids != 0
                labels = [words_of.get(int(t), "?") for t in ids[real]]
                values = per_position[i][real]
            else:
                ids = x_test[index]
                count = int((ids != 0).sum())
                labels = [words_of.get(int(t), "?") for t in ids[:count]]
                values = per_position[i, :count]
            rows.append((labels, values, caption))
        plot_saliency(
            out / f"saliency_{name}.png",
            rows,
            f"{name}: |∂ logit of the predicted class / ∂ input embedding| per position",
        )
        if name == "han":
            word_weights, sentence_weights = (
                w.numpy() for w in han_attention_weights(model, x_test[shown])
            )
            documents = []
            for i, index in enumerate(shown):
                parts = clauses(test_tokens[index], max_clauses)
                real = [s for s in range(len(parts))]
                words = [[words_of.get(int(t), "?") for t in x_test[index, s] if t] for s in real]
                width = max(len(w) for w in words)
                documents.append(
                    (
                        words,
                        word_weights[i, : len(real), :width],
                        sentence_weights[i, : len(real)],
                        f"true {class_names[y_test[index]]}, predicted "
                        f"{class_names[predictions[i]]} (left column: clause weights)",
                    )
                )
            plot_han_attention(out / "han_attention.png", documents, "HAN word and clause weights")
    lines = [
        f"Task `{args.task}` ({', '.join(class_names)}): {len(train_texts)} train / "
        f"{len(test_texts)} test sentences, {args.epochs} epochs.",
        "",
        "| model | parameters | training (s) | test accuracy |",
        "|---|---|---|---|",
    ]
    lines += [f"| {n} | {p:,} | {s:.0f} | {a:.3f} |" for n, p, s, a in results]
    (out / "results.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out}/ (saliency_*.png, han_attention.png, tsne_text_cnn.png, results.md)")
    print(f"done in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
