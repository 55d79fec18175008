# Runs once in every new Python kernel of the code-interpreter (kernel_bridge.py --setup), outside the user's
# namespace: adds the display formatters that give pandas DataFrames a `data` format and matplotlib figures a
# `chart` format (_tidepool_charts.py), shows a str result as its text (not its repr), and shows an image PIL saves
# to a file. The bridge defines _TIDEPOOL_ASSETS (the directory of these files).
def _tidepool_ci_setup():
    import functools
    import os

    from IPython import get_ipython
    from IPython.core.formatters import BaseFormatter, PlainTextFormatter
    from IPython.display import display as show
    from traitlets import ObjectName, Unicode

    shell = get_ipython()
    if shell is None:
        raise RuntimeError("no IPython shell to add the formatters to")

    class TableFormatter(BaseFormatter):
        format_type = Unicode("application/vnd.tidepool.data+json")
        print_method = ObjectName("_repr_tidepool_data_")
        _return_type = (dict,)

    class ChartFormatter(BaseFormatter):
        format_type = Unicode("application/vnd.tidepool.chart+json")
        print_method = ObjectName("_repr_tidepool_chart_")
        _return_type = (dict,)

    def table(frame):
        # Column name -> values, as JSON sees them (NaN -> null, timestamps -> ISO text, numpy -> numbers).
        import json

        return {str(column): json.loads(frame[column].to_json(orient="values", date_format="iso")) for column in frame.columns}

    charts_file = os.path.join(_TIDEPOOL_ASSETS, "_tidepool_charts.py")
    charts = {}

    def chart(figure):
        try:
            if "module" not in charts:
                import importlib.util

                spec = importlib.util.spec_from_file_location("_tidepool_charts", charts_file)
                charts["module"] = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(charts["module"])
            return charts["module"].figure_to_chart(figure)
        except Exception:  # a figure we cannot read still shows as an image
            return None

    display = shell.display_formatter
    for formatter, type_module, type_name, function in (
        (TableFormatter(parent=display), "pandas.core.frame", "DataFrame", table),
        # FigureBase, not Figure: IPython's matplotlib setup (select_figure_formats) pops every formatter's
        # Figure printer when pyplot is first configured; the lookup walks the MRO and finds this one.
        (ChartFormatter(parent=display), "matplotlib.figure", "FigureBase", chart),
    ):
        formatter.for_type_by_name(type_module, type_name, function)
        display.formatters[formatter.format_type] = formatter
        if formatter.format_type not in display.active_types:
            display.active_types.append(formatter.format_type)

    class StrAsTextFormatter(PlainTextFormatter):
        """text/plain of a str value is the string itself; of anything else (a str inside a list too) its repr."""

        def __call__(self, obj):
            if isinstance(obj, str):
                return obj
            return super().__call__(obj)

    plain = display.formatters["text/plain"]
    text = StrAsTextFormatter(parent=display)
    text.type_printers.update(plain.type_printers)
    text.deferred_printers.update(plain.deferred_printers)
    display.formatters["text/plain"] = text

    try:
        from PIL import Image
    except ImportError:
        return
    save = Image.Image.save

    @functools.wraps(save)
    def save_and_show(image, fp, *args, **kwargs):
        # A cell that saves an image to a file shows it too (a png result), once it is saved.
        saved = save(image, fp, *args, **kwargs)
        if isinstance(fp, (str, bytes, os.PathLike)):
            show(image)
        return saved

    Image.Image.save = save_and_show


_tidepool_ci_setup()
del _tidepool_ci_setup, _TIDEPOOL_ASSETS
