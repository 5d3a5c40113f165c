"""The GRU's two forms (`reset_after`): validation shared by the layers that take `cell="gru"`.

Cho et al. (2014, arXiv:1406.1078) apply the reset gate to the previous state before the
recurrent product; Keras' default (`reset_after=True`) applies it after, the form cuDNN fuses:

    reset_after=False:  h~ = tanh(x W_h + (r ⊙ h^(t-1)) U_h + b_h)
    reset_after=True:   h~ = tanh(x W_h + b_h + r ⊙ (h^(t-1) U_h + b'_h))
"""

from __future__ import annotations


def check_gru_form(cell, reset_after: bool, use_cudnn="auto") -> bool:
    """`reset_after`, checked against the cell and `use_cudnn`; a `ValueError` if it cannot apply.

    `reset_after=False` needs `cell="gru"` (an LSTM has no reset gate) and a `use_cudnn` other
    than True (cuDNN implements the reset-after form only).
    """
    if not isinstance(reset_after, bool):
        raise ValueError(
            f"Expected reset_after to be a bool. Received: reset_after={reset_after!r}"
        )
    if not reset_after and cell != "gru":
        raise ValueError(
            "reset_after=False chooses the form of a GRU and needs cell='gru'. Received: "
            f"cell={cell!r}, reset_after=False"
        )
    if not reset_after and use_cudnn is True:
        raise ValueError(
            "cuDNN implements the reset-after GRU only: use_cudnn=True needs reset_after=True. "
            "Received: use_cudnn=True, reset_after=False"
        )
    return reset_after


def gru_form_kwargs(cell, reset_after: bool) -> dict:
    """The keyword arguments of Keras' `GRU`/`GRUCell` for the form: none for another cell."""
    return {"reset_after": reset_after} if cell == "gru" else {}
