"""Rendered figures and reports, checked mechanically and by eye (issue 17 item 7)."""
