"""The recurrent language model (Mikolov et al., 2010; Graves, 2013): its builder, its step view
and the `rnn-lm` family."""
