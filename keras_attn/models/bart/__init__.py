"""BART (Lewis et al., 2020): builders and the `bart`, `bart-translator` and `bart-classifier`
families."""
