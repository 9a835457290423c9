"""What a run produced, as arrays (no streamlit): the trace and everything read off it."""
