"""The HTML report (report.html) and its per-kind sections."""
