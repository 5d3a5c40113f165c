"""BERT (Devlin et al., 2019) and BertSum (Liu and Lapata, 2019): builders and the `bert`,
`bert-classifier`, `bert-tagger` and `bertsum` families."""
