"""What one request may make the server hold: caps on size, rows, strings, filling and JSON depth.

Stock TensorFlow Serving expands every `TensorProto` of a request before anything checks it, so a
35-byte request declaring ten million strings makes a ten-million-row batch. `keras-attn serve`
reads each input's declared shape and value counts first (`tensors.tensor_proto_layout`), checks
dtype and shape against the signature, then these caps, and only then materialises the tensor:
what a request costs stays proportional to its size, within the limits below. Every cap is a
`keras-attn serve` flag of the same name; the defaults are `RequestLimits()`'s.

A request over a cap gets RESOURCE_EXHAUSTED (HTTP 429 on REST, as stock maps that status) with
a message naming the cap; a malformed one (a shape the signature does not take, a
`tensor_content` of the wrong size) gets INVALID_ARGUMENT.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from keras_attn.serving.status import resource_exhausted

if TYPE_CHECKING:  # tensors imports TensorFlow's protos: kept out of `keras-attn --help`
    from keras_attn.serving.tensors import TensorLayout


@dataclasses.dataclass(frozen=True)
class RequestLimits:
    """Caps on one request (each a positive integer).

    Attributes:
        max_request_bytes: the serialized gRPC message or the REST body (16 MiB). On gRPC it
            is also the server's `grpc.max_receive_message_length`, unless
            `--grpc_channel_arguments` sets a smaller one.
        max_rows_per_request: the first dimension of every input tensor, and the examples of a
            Classify / Regress / MultiInference request (1024).
        max_string_bytes: the bytes of any one string element (64 KiB).
        max_fill_bytes: what a tensor may grow by when it declares more elements than it
            carries (TensorFlow repeats the last value, or fills zeros / empty strings when there
            is none): the missing elements times their size, a string element counting 32 bytes
            plus its length (1 MiB). A proto carrying all its values never fills.
        max_json_depth: nesting of a REST body's JSON (64 levels: a rank-60 tensor fits).
    """

    max_request_bytes: int = 16 * 2**20
    max_rows_per_request: int = 1024
    max_string_bytes: int = 64 * 2**10
    max_fill_bytes: int = 2**20
    max_json_depth: int = 64

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"Expected {field.name} to be a positive int. Received: {value!r}")

    def check_rows(self, what: str, rows: int) -> None:
        """Refuses more than `max_rows_per_request` rows (`what` names the tensor or input)."""
        if rows > self.max_rows_per_request:
            raise resource_exhausted(
                f"{what} has {rows} rows, more than the server's limit of "
                f"{self.max_rows_per_request} per request (--max_rows_per_request)"
            )

    def check_tensor(self, alias: str, layout: TensorLayout, longest_string: int = 0) -> None:
        """Refuses a request input over the caps, from its layout (nothing materialised yet).

        Args:
            alias: the input's alias, for the message.
            layout: what the proto declares and carries.
            longest_string: the length of its longest carried string (0 for other dtypes).
        """
        if layout.dims:
            self.check_rows(f"Input tensor alias: {alias}", layout.dims[0])
        if longest_string > self.max_string_bytes:
            raise resource_exhausted(
                f"Input tensor alias: {alias} has a string of {longest_string} bytes, more than "
                f"the server's limit of {self.max_string_bytes} (--max_string_bytes)"
            )
        if layout.fill_bytes > self.max_fill_bytes:
            from keras_attn.serving.tensors import format_shape

            raise resource_exhausted(
                f"Input tensor alias: {alias} declares shape {format_shape(layout.dims)} "
                f"({layout.elements} elements) but carries {layout.carried} values; filling the "
                f"rest would take {layout.fill_bytes} bytes, more than the server's limit of "
                f"{self.max_fill_bytes} (--max_fill_bytes)"
            )
