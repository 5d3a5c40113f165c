"""The `cnn-rnn` family: a convolutional encoder (Gehring et al., 2017) under an attention RNN
decoder (Bahdanau et al., 2015)."""
