"""Pure figure builders: numpy arrays and token labels in, plotly Figures out (no torch, no streamlit)."""
