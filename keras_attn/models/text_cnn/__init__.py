"""The convolutional text classifier of Kim (2014) and the `text-cnn` family."""
