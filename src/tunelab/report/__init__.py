"""Comparative HTML reports from result rows: statistics, figures, notebook rendering, index.

Entry points: ``render.render(template, params, out_html)`` executes the text-notebook
template (``reports/sweep_report.py``) and writes self-contained HTML;
``index.write_index(reports, out, results_dir)`` writes the page linking them;
``cli.report_main(argv)`` / ``cli.index_main(argv)`` are the command-line forms.
"""
