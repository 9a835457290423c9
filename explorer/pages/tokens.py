"""Lesson step (being written)."""

from explorer.pages._shared import page_footer, page_header

page_header()
page_footer()
