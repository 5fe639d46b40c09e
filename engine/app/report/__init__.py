"""The report room: one HTML page (and its Markdown twin) per run or comparison, built from the
run folders alone. `page` lays it out, `panels` and `extras` draw each protocol's figures, `viewer`
embeds the per-item viewer."""
from .page import header, write_report

__all__ = ["header", "write_report"]
