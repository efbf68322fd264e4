"""Reading what other tools wrote: eval sets, datasets, traces and corpora, as their authors meant them."""
