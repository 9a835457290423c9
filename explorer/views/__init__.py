"""The views pages share: the code that draws each thing (explorer/pages holds only the pages)."""
