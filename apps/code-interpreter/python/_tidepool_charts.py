"""Structured chart data from a matplotlib figure: the `chart` format of the code-interpreter's results.

figure_to_chart(figure) returns a dict (see code-interpreter-wire.md): one chart for a figure with one axes
holding data, a `superchart` of charts for several, None for a figure without axes. Each axes is read as a
pie (wedges), bar chart (bar containers), box-and-whisker (boxplot lines), line chart (lines), scatter chart
(point collections), a line chart without lines when it is empty or, failing those, `unknown` with its title
only. A title, axis label or unit a figure does not have is None (null), as the published clients expect; a unit
is read from its axis label ("Time (s)" -> "s", "Length [m]" -> "m").
"""
import math
import re

_DATE_FORMATTERS = ("AutoDateFormatter", "ConciseDateFormatter", "DateFormatter")
# The unit in an axis label: the text of a parenthesis after a space, or of square brackets.
_UNIT = re.compile(r"\s\(([^()]*)\)|\[([^\[\]]*)\]")
# Pie angles are rounded to this many decimals: 90 % of a pie is 324 degrees, not 324.00000000000006.
_ANGLE_DECIMALS = 4


def _number(value):
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    if math.isnan(number) or math.isinf(number):
        return None
    return int(number) if number.is_integer() and abs(number) < 2**53 else number


def _label(artist):
    label = artist.get_label() or ""
    return "" if label.startswith("_") else label


def _text_or_none(text):
    return text or None


def _unit(label):
    match = _UNIT.search(label) if label else None
    return (match.group(1) or match.group(2) or None) if match else None


def _is_date_axis(axis):
    return type(axis.get_major_formatter()).__name__ in _DATE_FORMATTERS


def _categories(axis):
    """Position -> name of a categorical axis (strings plotted on it), None for any other axis."""
    from matplotlib.category import UnitData

    if not isinstance(axis.get_units(), UnitData):
        return None
    return {position: name for name, position in axis.get_units()._mapping.items()}


def _axis_value(axis, value, categories=None):
    if categories is not None:
        number = _number(value)
        return categories.get(number, number)
    if _is_date_axis(axis):
        from matplotlib import dates

        try:
            return dates.num2date(value).isoformat()
        except (ValueError, OverflowError):
            return _number(value)
    return _number(value)


def _scale(axis):
    if _is_date_axis(axis):
        return "datetime"
    if _categories(axis) is not None:
        return "categorical"
    return axis.get_scale()


def _ticks(axis):
    return [_axis_value(axis, t) for t in axis.get_ticklocs()], [t.get_text() for t in axis.get_ticklabels()]


def _base(ax, kind):
    return {"type": kind, "title": _text_or_none(ax.get_title()), "elements": []}


def _base_2d(ax, kind):
    x_label, y_label = _text_or_none(ax.get_xlabel()), _text_or_none(ax.get_ylabel())
    chart = _base(ax, kind)
    chart.update(x_label=x_label, y_label=y_label, x_unit=_unit(x_label), y_unit=_unit(y_label))
    return chart


def _point_chart(ax, kind, series):
    chart = _base_2d(ax, kind)
    x_ticks, x_labels = _ticks(ax.xaxis)
    y_ticks, y_labels = _ticks(ax.yaxis)
    chart.update(
        x_ticks=x_ticks, x_tick_labels=x_labels, x_scale=_scale(ax.xaxis),
        y_ticks=y_ticks, y_tick_labels=y_labels, y_scale=_scale(ax.yaxis),
    )
    x_categories, y_categories = _categories(ax.xaxis), _categories(ax.yaxis)
    for label, points in series:
        chart["elements"].append({
            "label": label,
            "points": [[_axis_value(ax.xaxis, x, x_categories), _axis_value(ax.yaxis, y, y_categories)] for x, y in points],
        })
    return chart


def _pie(ax, wedges):
    chart = _base(ax, "pie")
    for wedge in wedges:
        chart["elements"].append({
            "label": _label(wedge),
            "angle": _number(round(abs(wedge.theta2 - wedge.theta1), _ANGLE_DECIMALS)),
            "radius": _number(wedge.r),
        })
    return chart


def _bars(ax, containers):
    chart = _base_2d(ax, "bar")
    horizontal = any(getattr(c, "orientation", "vertical") == "horizontal" for c in containers)
    category_axis = ax.yaxis if horizontal else ax.xaxis
    positions = list(category_axis.get_ticklocs())
    names = [t.get_text() for t in category_axis.get_ticklabels()]
    for container in containers:
        group = _label(container)
        for patch in container.patches:
            if horizontal:
                center, value = patch.get_y() + patch.get_height() / 2, patch.get_width()
            else:
                center, value = patch.get_x() + patch.get_width() / 2, patch.get_height()
            label = ""
            if positions:
                nearest = min(range(len(positions)), key=lambda i: abs(positions[i] - center))
                if nearest < len(names):
                    label = names[nearest]
            chart["elements"].append({"label": label or str(_number(center)), "group": group, "value": _number(value)})
    return chart


def _vertical(line):
    x = list(line.get_xdata())
    return len(x) == 2 and x[0] == x[1]


def _horizontal(line):
    y = list(line.get_ydata())
    return len(y) == 2 and y[0] == y[1]


def _boxplot_group(lines):
    """One box of matplotlib's boxplot, drawn as: [box outline], low whisker, high whisker, low cap, high cap,
    median, fliers (markers only); the outline is a patch instead with patch_artist=True. Whiskers run from the
    quartiles out to the extremes. None if the lines are not that."""
    if len(lines) == 7:
        lines = lines[1:]
    if len(lines) != 6:
        return None
    low, high, cap_low, cap_high, median, fliers = lines
    if not (_vertical(low) and _vertical(high) and _horizontal(cap_low) and _horizontal(cap_high) and _horizontal(median)):
        return None
    if fliers.get_linestyle() not in ("None", "none", " ", ""):
        return None
    low_y, high_y = list(low.get_ydata()), list(high.get_ydata())
    return {
        "min": _number(low_y[1]),
        "first_quartile": _number(low_y[0]),
        "median": _number(list(median.get_ydata())[0]),
        "third_quartile": _number(high_y[0]),
        "max": _number(high_y[1]),
        "outliers": [_number(v) for v in fliers.get_ydata()],
    }


def _boxplot_from_lines(ax):
    lines = list(ax.lines)
    names = [t.get_text() for t in ax.xaxis.get_ticklabels()]
    for per_box in (7, 6):
        if not lines or len(lines) % per_box:
            continue
        boxes = [_boxplot_group(lines[i:i + per_box]) for i in range(0, len(lines), per_box)]
        if all(boxes):
            chart = _base_2d(ax, "box_and_whisker")
            for index, box in enumerate(boxes):
                box["label"] = names[index] if index < len(names) and names[index] else str(index + 1)
                chart["elements"].append(box)
            return chart
    return None


def axes_to_chart(ax):
    from matplotlib.collections import PathCollection
    from matplotlib.container import BarContainer
    from matplotlib.patches import Wedge

    if not _has_content(ax):
        # An axes with nothing drawn yet (a plot call that failed, a figure to be filled) is a line chart without
        # lines, as the reference reads it: its axes' scales and ticks are still there.
        return _point_chart(ax, "line", [])
    wedges = [p for p in ax.patches if isinstance(p, Wedge)]
    if wedges:
        return _pie(ax, wedges)
    bar_containers = [c for c in ax.containers if isinstance(c, BarContainer)]
    if bar_containers:
        return _bars(ax, bar_containers)
    boxplot = _boxplot_from_lines(ax)
    if boxplot:
        return boxplot
    lines = [l for l in ax.lines if len(l.get_xdata()) > 0]
    if lines:
        return _point_chart(ax, "line", [(_label(l), zip(l.get_xdata(orig=False), l.get_ydata(orig=False))) for l in lines])
    scatters = [c for c in ax.collections if isinstance(c, PathCollection) and len(c.get_offsets()) > 0]
    if scatters:
        return _point_chart(ax, "scatter", [(_label(c), [tuple(p) for p in c.get_offsets()]) for c in scatters])
    return _base(ax, "unknown")


def _has_content(ax):
    return bool(ax.lines or ax.patches or ax.collections or ax.containers or ax.images or ax.artists)


def figure_to_chart(figure):
    """The figure's axes that hold something; a figure of empty axes is read as those axes (an `unknown` chart)."""
    axes = [ax for ax in figure.axes if _has_content(ax)] or list(figure.axes)
    if not axes:
        return None
    if len(axes) == 1:
        return axes_to_chart(axes[0])
    title = figure._suptitle.get_text() if getattr(figure, "_suptitle", None) is not None else ""
    return {"type": "superchart", "title": _text_or_none(title), "elements": [axes_to_chart(ax) for ax in axes]}
