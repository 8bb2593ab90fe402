"""Renderings of verdicts: the run summary and text, Markdown and JSON reports."""
