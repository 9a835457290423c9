"""A from-scratch Transformer (Vaswani et al. 2017) that returns every internal it computes."""
