"""Experiments on a run (no streamlit): heads turned off, the logit lens, attribution, training here."""
