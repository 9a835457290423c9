"""The lesson's words: what each step says about the model shown (the table of pages is explorer.navigation)."""
