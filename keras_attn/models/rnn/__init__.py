"""The recurrent translators (Sutskever et al., 2014; Bahdanau et al., 2015; Luong et al., 2015):
their builders, their step view and the `rnn-plain`, `rnn-attention` and `rnn-luong` families."""
