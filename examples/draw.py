"""A small DRAW (Gregor et al., 2015): a recurrent variational autoencoder that reads and writes
its images through Gaussian attention windows, step by step.

    python examples/draw.py [--steps 1500] [--glimpses 8] [--seed 0] [--out draw]

The images are generated binary scenes: one or two shapes (circle, square, diamond, triangle) of
random size and place on a 32 x 32 canvas (`keras_attn.vision.scenes.shape_mask`). At each of
`--glimpses` steps the encoder LSTM reads a 5 x 5 glimpse of the image and of the error image
`x - sigmoid(canvas)` (`keras_attn.layers.DrawRead`) where the decoder's last state puts the
window, the latent `z_t` is drawn from the encoder's Gaussian, and the decoder LSTM writes a 5 x 5
patch onto the canvas (`keras_attn.layers.DrawWrite`). The loss is the negative evidence lower
bound: the Bernoulli cross-entropy of the final canvas plus the KL divergence of every `z_t` from
N(0, I) (eq. 9-12).

Prints the test loss (nats per image) before and after training, against the cross-entropy of
the mean image, and writes to `--out`: `draw_steps.png` (the canvas of a few test images after
each step, the read window in green and the write window in red) and `draw_samples.png`
(images generated from the prior, step by step).

References:
    Gregor, Danihelka, Graves, Rezende and Wierstra, 2015, "DRAW: A Recurrent Neural Network For
    Image Generation", arXiv:1502.04623.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import keras
import matplotlib
import numpy as np
from keras import ops

from keras_attn.layers import DrawRead, DrawWrite
from keras_attn.vision.scenes import SHAPES, shape_mask

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

SIZE = 32
GRID = 5


def make_images(rng: np.random.Generator, count: int) -> np.ndarray:
    """`(count, SIZE, SIZE, 1)` float32 binary images of one or two random shapes."""
    images = np.zeros((count, SIZE, SIZE), bool)
    for image in images:
        for _ in range(rng.integers(1, 3)):
            radius = rng.uniform(4.0, 8.0)
            center = rng.uniform(radius, SIZE - radius, size=2)
            image |= shape_mask(str(rng.choice(SHAPES)), tuple(center), radius, SIZE)
    return images[..., None].astype("float32")


@keras.saving.register_keras_serializable("draw_example")
class Draw(keras.Model):
    """DRAW with read and write attention; `call` returns the final canvas' logits and adds the
    latent KL term to the model's losses."""

    def __init__(self, glimpses=8, units=128, latent_dim=10, seed=0, **kwargs):
        super().__init__(**kwargs)
        self.glimpses, self.units, self.latent_dim = glimpses, units, latent_dim
        self.read = DrawRead(GRID, name="read")
        self.write = DrawWrite(GRID, SIZE, SIZE, name="write")
        self.encoder = keras.layers.LSTMCell(units, name="encoder")
        self.decoder = keras.layers.LSTMCell(units, name="decoder")
        self.posterior = keras.layers.Dense(2 * latent_dim, name="posterior")
        self.patch = keras.layers.Dense(GRID * GRID, name="patch")
        self.noise = keras.random.SeedGenerator(seed)

    def _initial(self, batch):
        zeros = ops.zeros((batch, self.units))
        return zeros, [zeros, zeros], [zeros, zeros], ops.zeros((batch, SIZE, SIZE, 1))

    def _write(self, h_dec, decoder_state, z, canvas):
        h_dec, decoder_state = self.decoder(z, decoder_state)
        patch = ops.reshape(self.patch(h_dec), (-1, GRID, GRID, 1))
        return h_dec, decoder_state, canvas + self.write(patch, h_dec)

    def run(self, images, record=False):
        """`(canvas logits, KL per image, steps)`; `steps` lists, when `record`, each step's
        canvas and its read and write windows (`DrawRead.window_parameters`)."""
        h_dec, encoder_state, decoder_state, canvas = self._initial(ops.shape(images)[0])
        kl, steps = 0.0, []
        for _ in range(self.glimpses):
            read_state = h_dec
            error = images - ops.sigmoid(canvas)
            glimpse = ops.concatenate(
                [self.read(images, read_state), self.read(error, read_state)], axis=-1
            )
            flat = ops.reshape(glimpse, (-1, GRID * GRID * 2))
            h_enc, encoder_state = self.encoder(ops.concatenate([flat, h_dec], -1), encoder_state)
            mean, log_variance = ops.split(self.posterior(h_enc), 2, axis=-1)
            noise = keras.random.normal(ops.shape(mean), seed=self.noise)
            z = mean + ops.exp(0.5 * log_variance) * noise
            kl += 0.5 * ops.sum(
                ops.square(mean) + ops.exp(log_variance) - log_variance - 1.0, axis=-1
            )
            h_dec, decoder_state, canvas = self._write(h_dec, decoder_state, z, canvas)
            if record:
                steps.append(
                    {
                        "canvas": ops.sigmoid(canvas),
                        "read": self.read.window_parameters(read_state, SIZE, SIZE),
                        "write": self.write.window_parameters(h_dec, SIZE, SIZE),
                    }
                )
        return canvas, kl, steps

    def call(self, images):
        canvas, kl, _ = self.run(images)
        self.add_loss(ops.mean(kl))
        return canvas

    def generate(self, count: int):
        """Images drawn from the prior, `z_t ~ N(0, I)`: the canvas after each step, and the
        write windows."""
        h_dec, _, decoder_state, canvas = self._initial(count)
        steps = []
        for _ in range(self.glimpses):
            z = keras.random.normal((count, self.latent_dim), seed=self.noise)
            h_dec, decoder_state, canvas = self._write(h_dec, decoder_state, z, canvas)
            window = self.write.window_parameters(h_dec, SIZE, SIZE)
            steps.append({"canvas": ops.sigmoid(canvas), "write": window})
        return steps

    def get_config(self):
        config = super().get_config()
        config.update(glimpses=self.glimpses, units=self.units, latent_dim=self.latent_dim)
        return config


def reconstruction_loss(images, logits):
    """The Bernoulli cross-entropy of the image under the canvas, summed over pixels."""
    pixels = keras.losses.binary_crossentropy(images, logits, from_logits=True)
    return ops.sum(pixels, axis=(1, 2))


def test_loss(model: Draw, images: np.ndarray) -> dict:
    """Mean reconstruction cross-entropy, KL and their sum (nats per image)."""
    canvas, kl, _ = model.run(ops.convert_to_tensor(images))
    reconstruction = float(ops.mean(reconstruction_loss(images, canvas)))
    kl = float(ops.mean(kl))
    return {"reconstruction": reconstruction, "kl": kl, "loss": reconstruction + kl}


def mean_image_loss(train: np.ndarray, test: np.ndarray) -> float:
    """The cross-entropy of the test images under the training images' mean (no latent)."""
    mean = np.clip(train.mean(0, keepdims=True), 1e-4, 1 - 1e-4)
    nats = -(test * np.log(mean) + (1 - test) * np.log(1 - mean))
    return float(nats.sum(axis=(1, 2, 3)).mean())


def draw_window(ax, window, row, color):
    """The grid's extent: N strides wide, around its centre."""
    extent = float(window["stride"][row]) * GRID
    x = float(window["center_x"][row]) - extent / 2
    y = float(window["center_y"][row]) - extent / 2
    ax.add_patch(Rectangle((x, y), extent, extent, fill=False, color=color, linewidth=1.2))


def plot_steps(path, steps, rows, title):
    fig, axes = plt.subplots(rows, len(steps), figsize=(1.3 * len(steps), 1.3 * rows))
    axes = np.atleast_2d(axes)
    for t, step in enumerate(steps):
        for row in range(rows):
            ax = axes[row, t]
            ax.imshow(np.asarray(step["canvas"])[row, ..., 0], cmap="gray", vmin=0, vmax=1)
            if "read" in step:
                draw_window(ax, {k: np.asarray(v) for k, v in step["read"].items()}, row, "lime")
            draw_window(ax, {k: np.asarray(v) for k, v in step["write"].items()}, row, "red")
            ax.set_xlim(-0.5, SIZE - 0.5), ax.set_ylim(SIZE - 0.5, -0.5)
            ax.set_xticks([]), ax.set_yticks([])
        axes[0, t].set_title(f"t={t + 1}", fontsize=8)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1500, help="training steps (batches of 64)")
    parser.add_argument("--glimpses", type=int, default=8, help="read/write steps per image")
    parser.add_argument("--units", type=int, default=128, help="LSTM units of each network")
    parser.add_argument("--seed", type=int, default=0, help="weights, noise and images")
    parser.add_argument("--out", default="draw", help="output directory")
    args = parser.parse_args(argv)
    for name in ("steps", "glimpses", "units"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be positive. Received: {getattr(args, name)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    keras.utils.set_random_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    train_images = make_images(rng, 4096)
    test_images = make_images(np.random.default_rng(args.seed + 1000), 256)
    model = Draw(args.glimpses, args.units, seed=args.seed)
    model.compile(optimizer=keras.optimizers.Adam(1e-3, clipnorm=10.0), loss=reconstruction_loss)
    before = test_loss(model, test_images)
    print(f"the mean image: cross-entropy {mean_image_loss(train_images, test_images):.1f} nats")
    print(f"untrained: loss {before['loss']:.1f} nats per image")
    started = time.perf_counter()
    for _ in range(args.steps):
        batch = train_images[rng.integers(0, len(train_images), 64)]
        model.train_on_batch(batch, batch)
    after = test_loss(model, test_images)
    print(
        f"trained ({args.steps} steps, {time.perf_counter() - started:.0f} s): loss "
        f"{after['loss']:.1f} nats per image (reconstruction {after['reconstruction']:.1f}, "
        f"KL {after['kl']:.1f})"
    )
    _, _, steps = model.run(ops.convert_to_tensor(test_images[:4]), record=True)
    plot_steps(
        out / "draw_steps.png",
        steps,
        4,
        "DRAW reconstructing test images: canvas per step, read window (green), write (red)",
    )
    plot_steps(out / "draw_samples.png", model.generate(4), 4, "DRAW sampling from the prior")
    print(f"wrote {out}/draw_steps.png and draw_samples.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
