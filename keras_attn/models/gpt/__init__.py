"""GPT (Radford et al., 2018): builders, step view and the `gpt` and `gpt-classifier` families."""
