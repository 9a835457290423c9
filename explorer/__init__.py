"""The attention explorer: traces, figures, pages and a headless CLI over the from-scratch models."""
