"""Scanner: classify every file of a PyTorch checkout as CUDA, mixed or generic, with evidence."""
