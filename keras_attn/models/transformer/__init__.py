"""The Transformer translator (Vaswani et al., 2017): builder, cached step view, the parts the
Transformer families share and the `transformer` family."""
