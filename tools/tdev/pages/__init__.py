"""Self-contained HTML pages of tdev's results: the scan as a map of the tree (where the CUDA
code lives, by directory, with the evidence per file) and the extraction plan as a map from
source to destination (the restructured layout). Renderers are pure: a result object in, one
HTML string out; nothing on a page reaches the network."""
