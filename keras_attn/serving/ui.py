"""The attention viewer: one page on the REST port that queries the server's own REST API.

`keras-attn serve --ui` answers, beside the REST API:

    GET /, /ui, /ui/                 the page (keras_attn/serving/ui_assets/index.html)
    GET /ui/static/FILE              its script and style sheet (ui_assets/FILE)
    GET /ui/models.json              {"models": [NAME, ...], "decoding": {NAME: {...} | null}}: the
                                     models with a version available, and how the latest one
                                     decodes (`keras_attn.formats.read_export_description`)
    GET /ui/scene.png?seed=N&size=S  a generated scene (keras_attn.vision.scenes), for captioners
                                     and answerers

Nothing else: every other path goes on to the REST API (404 outside it). The page reads each
model's metadata and calls `:predict` like any other client; the routes above only read. Every
response carries a Content-Security-Policy that lets the page load nothing but its own files (no
inline script, no framing) and `X-Content-Type-Options: nosniff`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from importlib import resources
from urllib.parse import parse_qs, urlsplit

from keras_attn.serving.http_server import HttpRequest, HttpResponse

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = (
    ("Content-Security-Policy", CONTENT_SECURITY_POLICY),
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "no-referrer"),
    ("Cache-Control", "no-cache"),
)
_PAGE_PATHS = ("/", "/ui", "/ui/")
_STATIC_PREFIX = "/ui/static/"
_CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
}
_SCENE_SIZES = range(32, 257)
_MAX_SEED = 2**32 - 1


def _read_assets() -> dict[str, tuple[bytes, str]]:
    """The packaged files of the page: name → (bytes, content type)."""
    assets = {}
    for entry in resources.files("keras_attn.serving").joinpath("ui_assets").iterdir():
        suffix = "." + entry.name.rpartition(".")[2]
        if entry.is_file() and suffix in _CONTENT_TYPES:
            assets[entry.name] = (entry.read_bytes(), _CONTENT_TYPES[suffix])
    return assets


class ViewerPages:
    """Answers the viewer's GET routes; `respond` gives None for any other request.

    Args:
        model_names: the names of the models to offer (called on each `/ui/models.json`).
        decoding: `decoding(name)`, how the model's latest version decodes (`{"decoder":
            "beam", "beam_size": 4, ...}`), or None when its export does not say.
    """

    def __init__(
        self,
        model_names: Callable[[], Iterable[str]],
        decoding: Callable[[str], dict | None] = lambda name: None,
    ):
        self._model_names = model_names
        self._decoding = decoding
        self._assets = _read_assets()

    def respond(self, request: HttpRequest) -> HttpResponse | None:
        """The response to a viewer route, or None when the request is not one."""
        if request.method not in ("GET", "HEAD"):
            return None
        parts = urlsplit(request.target)
        path = parts.path
        if path in _PAGE_PATHS:
            return self._asset("index.html")
        if path.startswith(_STATIC_PREFIX) and path != _STATIC_PREFIX + "index.html":
            return self._asset(path.removeprefix(_STATIC_PREFIX))
        if path == "/ui/models.json":
            names = list(self._model_names())
            decoding = {name: self._decoding(name) for name in names}
            body = json.dumps({"models": names, "decoding": decoding}).encode("utf-8")
            return _secured(200, body, "application/json")
        if path == "/ui/scene.png":
            return self._scene(parse_qs(parts.query))
        return None

    def _asset(self, name: str) -> HttpResponse | None:
        if name not in self._assets:
            return None
        body, content_type = self._assets[name]
        return _secured(200, body, content_type)

    def _scene(self, query: dict[str, list[str]]) -> HttpResponse:
        try:
            seed = int(query.get("seed", ["0"])[0])
            size = int(query.get("size", ["64"])[0])
        except ValueError:
            seed = size = -1
        if not 0 <= seed <= _MAX_SEED or size not in _SCENE_SIZES:
            message = f"Expected seed in 0..{_MAX_SEED} and size in 32..256"
            return _secured(400, json.dumps({"error": message}).encode("utf-8"), "application/json")
        import numpy as np

        from keras_attn.vision.scenes import encode_png, generate_scene

        scene = generate_scene(np.random.default_rng(seed), image_size=size)
        return _secured(200, encode_png(scene.image), "image/png")


def _secured(status: int, body: bytes, content_type: str) -> HttpResponse:
    return HttpResponse(status, body, content_type, SECURITY_HEADERS)
